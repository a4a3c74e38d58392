"""Which definition of an overloaded kernel name an instantiation selects. vLLM defines
`fused_add_rms_norm_kernel<scalar_t, width>` twice, one returning
`std::enable_if_t<(width > 0) && ...>`, the other `std::enable_if_t<(width == 0) || ...>`:
`<float, 0>` selects the second. kport keeps a definition whose template parameters take the
arguments and whose `enable_if` conditions do not fold to false for them (folding.py); the
translator and the CUDA slice both keep that one only."""

from __future__ import annotations

from tree_sitter import Node

from agent.translate.folding import Value, fold
from agent.translate.tree import _device_code, _fn_name, _text, _walk

_ENABLE_IF = ("enable_if", "enable_if_t")
_PARAMETERS = ("parameter_declaration", "optional_parameter_declaration",
               "type_parameter_declaration", "optional_type_parameter_declaration",
               "variadic_parameter_declaration", "variadic_type_parameter_declaration")


def definitions(root: Node, data: bytes, name: str) -> list[tuple[Node, Node]]:
    """(function_definition, the node to emit: its template_declaration if any) of every
    device-code function named ``name`` in ``root``, in file order."""
    out = []
    for n in _walk(root):
        if n.type == "function_definition" and _fn_name(n, data) == name and \
                _device_code(n, data):
            parent = n.parent
            out.append((n, parent if parent is not None and
                        parent.type == "template_declaration" else n))
    return out


def _bindings(outer: Node, args: list[str], data: bytes) -> dict[str, Value] | None:
    """The integer and bool template parameters of ``outer`` bound to ``args`` (or their
    defaults); None when ``args`` are more than its parameters."""
    plist = outer.child_by_field_name("parameters") \
        if outer.type == "template_declaration" else None
    params = [p for p in (plist.named_children if plist is not None else ())
              if p.type in _PARAMETERS]
    if len(args) > len(params) and not any(p.type.startswith("variadic") for p in params):
        return None
    out: dict[str, Value] = {}
    for i, p in enumerate(params):
        if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue
        ident = next((c for c in _walk(p) if c.type == "identifier"), None)
        if ident is None:
            continue
        value = p.child_by_field_name("default_value")
        if i < len(args):
            spelled = args[i].strip()
            got = {"true": True, "false": False}.get(spelled)
            value_known = got if got is not None else _int(spelled)
        else:
            value_known = fold(value, data, out) if value is not None else None
        if value_known is not None:
            out[_text(ident, data)] = value_known
    return out


def _int(text: str) -> int | None:
    try:
        return int(text.rstrip("uUlL"), 0)
    except ValueError:
        return None


def _conditions(fn: Node, outer: Node) -> list[Node]:
    """The first arguments of the `enable_if`/`enable_if_t` in ``fn``'s return type and in
    ``outer``'s template parameters: the conditions under which the definition exists."""
    parts = [c for c in fn.children if c.type not in ("function_declarator", "compound_statement")]
    if outer is not fn:
        parts.append(outer.child_by_field_name("parameters"))
    out = []
    for part in parts:
        for m in _walk(part) if part is not None else ():
            if m.type == "template_type" and m.child_by_field_name("name") is not None and \
                    m.child_by_field_name("name").type == "type_identifier":
                arguments = m.child_by_field_name("arguments")
                if _name(m) in _ENABLE_IF and arguments is not None and arguments.named_children:
                    out.append(arguments.named_children[0])
    return out


def _name(template_type: Node) -> str:
    name = template_type.child_by_field_name("name")
    return name.text.decode(errors="replace") if name is not None else ""


def select(root: Node, data: bytes, name: str, args: list[str], where: str,
           kernel: str) -> tuple[Node, Node] | None:
    """The definition of kernel ``name`` that ``args`` (its template arguments as spelled)
    select: the only one, or among overloads the only one whose parameters take ``args`` and
    whose enable_if conditions do not fold to false; None when there is none. Raises
    TranslateError naming the lines when several or none remain."""
    found = definitions(root, data, name)
    if len(found) <= 1:
        return found[0] if found else None
    fits = []
    for fn, outer in found:
        bound = _bindings(outer, args, data)
        values = [fold(c, data, bound) for c in _conditions(fn, outer)] if bound is not None \
            else [False]
        if all(v is None or bool(v) for v in values):
            fits.append((fn, outer))
    if len(fits) == 1:
        return fits[0]
    from agent.translate.analyze import TranslateError  # lazy: analyze imports this module
    lines = ", ".join(str(outer.start_point[0] + 1) for _, outer in (fits or found))
    raise TranslateError(
        f"{where}: {kernel}: {len(found)} definitions of {name} and "
        + (f"{len(fits)} of them (at lines {lines} of the code as read) may be the one this "
           "instantiation selects; kport decides only by the number of template arguments "
           "and enable_if conditions over integer and bool parameters" if fits else
           f"none fits these template arguments (definitions at lines {lines} of the code as "
           "read)") + "; put the one you mean in a file of its own and port that")
