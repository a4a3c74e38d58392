"""Pointer fields of a struct parameter (issue 15). Real kernels take their arrays through a
parameters struct: causal-conv1d's ``ConvParamsBase``, mamba's ``SSMParamsBase`` and
FlashAttention's ``Flash_fwd_params`` hold ``void *__restrict__ x_ptr`` fields the kernel
casts (``reinterpret_cast<input_t *>(params.x_ptr)``). MLX passes arrays, not structs holding
pointers, so for the translator each pointer field the kernel reads is *flattened*: the CUDA
source it translates gets a buffer parameter of its own per field, ``params_x_ptr`` (the
struct's name and the field's path joined by ``_``), typed by the cast the kernel applies to it,
and each ``params.x_ptr`` (with its cast) becomes that name. Roles, null tests and shapes then
follow the field as they follow any pointer parameter. In the struct the field keeps its 8
bytes as a ``uint64_t`` (Metal has no pointer in a constant struct), which the port never reads.

The oracle runs the original kernel: cuda_sim writes each array's address into the struct's
bytes (runners/structs.py ``WithPointers``), so a port that flattens wrongly disagrees with it.

What is not flattened is a reason (``problems``): the struct passed whole to a function (its
pointer fields could be read there), a field cast to two element types, an element type the
source does not let kport resolve to a scalar type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from agent.translate.folding import constexpr_values, fold
from agent.translate.macros import template_parts
from agent.translate.tree import _fn_name, _text, _walk, aliases_in

_CASTS = ("reinterpret_cast", "static_cast", "const_cast")
# CUDA's vector types and the dtype of their elements (analyze.py's VECTOR_TYPE, which imports
# this module)
_VECTOR = re.compile(r"(u?char|u?short|u?int|float)([234])")
_VECTOR_BASE = {"char": "int8", "uchar": "uint8", "short": "int16", "ushort": "uint16",
                "int": "int32", "uint": "uint32", "float": "float32"}


@dataclass(frozen=True)
class Flat:
    """One pointer field flattened into a buffer parameter."""

    param: str  # the struct parameter ("params")
    path: str  # the field's path in it ("x_ptr", "inner.y")
    name: str  # the buffer parameter's name ("params_x_ptr")
    ctype: str  # its element type, resolved ("float", "int32_t")


def flatten(data: bytes, root: Node, kfn: Node, structs: dict[str, tuple[str, list[dict]]],
            template: list[tuple[str, object]], scalar_types: dict[str, str],
            taken: set[str]) -> tuple[bytes, list[Flat], dict[str, str]]:
    """``data`` with the pointer fields of the kernel ``kfn``'s struct parameters
    (``structs``: name -> (C type, fields with ``"pointee"`` on pointer fields)) flattened;
    the flattened fields; and why a struct's fields could not be (by parameter name).
    ``template``: the kernel's template arguments; ``scalar_types``: the C scalar type names
    (to their dtype names, which a template argument may be given as)
    an element type must resolve to; ``taken``: names already used in the kernel."""
    body = kfn.child_by_field_name("body")
    resolve = _Resolver(root, data, kfn, dict(template), scalar_types)
    edits: list[tuple[int, int, str]] = []
    flats: list[Flat] = []
    problems: dict[str, str] = {}
    for param, (ctype, fields) in structs.items():
        pointers = _pointer_paths(fields)
        nested = nested_pointer(fields)
        if nested:
            problems[param] = f"field {nested} is a pointer inside a nested struct (not " \
                "flattened yet)"
            continue
        if not pointers:
            continue
        dead = _dead_branches(body, data, template)
        found, why = _uses(body, data, param, pointers, root)
        skipped = [x for x in found if any(_inside(x[1], d) for d, _ in dead)]
        found = [x for x in found if x not in skipped]
        # a branch this instantiation never takes (`kIsCircularBuffer ? params.cache_seqlens[b]
        # : 0` with kIsCircularBuffer false) keeps no field: the live branch stands in for it
        edits += [(d.start_byte, d.end_byte, live) for d, live in dead
                  if any(_inside(x[1], d) for x in skipped)]
        if why:
            problems[param] = why
            continue
        types: dict[str, str] = {}
        vectors: set[str] = set()  # paths read as CUDA vectors: their casts stay
        cast_paths = {path for path, _, cast, _ in found if cast is not None}
        for path, _, cast, _ in found:
            if cast is None and path in cast_paths:
                continue  # a null test or a copy: the casts say what it points at
            spelled = cast if cast is not None else pointers[path]
            resolved = resolve(spelled)
            if resolved is None:
                why = (f"field {path} points at {spelled!r}, which kport cannot resolve to a "
                       "scalar or vector type")
                break
            scalar = resolve.scalar_of(resolved)
            if scalar != resolved:
                vectors.add(path)
            if types.setdefault(path, scalar) != scalar:
                why = f"field {path} is read as both {types[path]} and {resolved}"
                break
        if why:
            problems[param] = why
            continue
        own = {path: _fresh(f"{param}_{path.replace('.', '_')}", taken) for path in types}
        for path, node, _, field in found:
            # a vector view keeps its cast (`reinterpret_cast<float2 *>(params_x_ptr)`) of a
            # buffer of its scalars, which is what a caller passes (MLX has no float2 arrays)
            at = field if path in vectors else node
            edits.append((at.start_byte, at.end_byte, own[path]))
        flats += [Flat(param, path, own[path], types[path]) for path in types]
        edits += _struct_edits(root, data, ctype, fields)
    if flats:
        plist = kfn.child_by_field_name("declarator").child_by_field_name("parameters")
        close = plist.end_byte - 1
        edits.append((close, close, "".join(f", {f.ctype} *__restrict__ {f.name}"
                                            for f in flats)))
    out = data
    for start, end, new in sorted(set(edits), key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + new.encode() + out[end:]
    return out, flats, problems


def _pointer_paths(fields: list[dict]) -> dict[str, str]:
    """Each pointer field's name and pointee type as spelled."""
    return {f["name"]: f.get("pointee", "void") for f in fields if f.get("dtype") == "pointer"}


def nested_pointer(fields: list[dict], prefix: str = "") -> str:
    """The path of a pointer field inside a nested struct ("" when none): not flattened yet."""
    for f in fields:
        if f.get("fields"):
            inner = [g for g in f["fields"] if g.get("dtype") == "pointer"]
            if inner:
                return f"{prefix}{f['name']}.{inner[0]['name']}"
            deeper = nested_pointer(f["fields"], f"{prefix}{f['name']}.")
            if deeper:
                return deeper
    return ""


def _uses(body: Node, data: bytes, param: str, pointers: dict[str, str], root: Node
          ) -> tuple[list[tuple[str, Node, str | None, Node]], str]:
    """Each use of a pointer field of ``param`` in ``body``: (path, the node to replace, the
    cast type spelled or None, the field expression itself); or why the fields cannot be
    followed."""
    found = []
    for n in _walk(body):
        if n.type != "identifier" or _text(n, data) != param:
            continue
        node, path = n, []
        while node.parent is not None and node.parent.type == "field_expression" and \
                node.parent.child_by_field_name("argument") == node and \
                _text(node.parent.child_by_field_name("operator"), data) == ".":
            node = node.parent
            path.append(_text(node.child_by_field_name("field"), data))
            if ".".join(path) in pointers:
                break
        dotted = ".".join(path)
        if dotted in pointers:
            outer, cast = _cast_around(node, data)
            found.append((dotted, outer, cast, node))
        elif not path and not _callee_reads_no_pointer(n, data, root, pointers):
            context = _text(n.parent, data) if n.parent is not None else param
            return [], (f"the struct is used whole ({' '.join(context.split())[:60]!r}), so "
                        f"its pointer fields ({', '.join(pointers)}) cannot be followed")
    return found, ""


def _dead_branches(body: Node, data: bytes, template: list[tuple[str, object]]
                   ) -> list[tuple[Node, str]]:
    """The branches of ``c ? a : b`` and ``if (c)`` whose condition this instantiation folds
    (template arguments, constexprs), each with the text that may replace it: the live
    branch of a ternary, an empty block for an if's."""
    known = constexpr_values(body, data, {k: v for k, v in template
                                          if isinstance(v, (bool, int))})
    out = []
    for n in _walk(body):
        if n.type == "conditional_expression":
            value = fold(n.child_by_field_name("condition"), data, known)
            yes, no = n.child_by_field_name("consequence"), n.child_by_field_name("alternative")
            if value is not None and yes is not None and no is not None:
                dead, live = (no, yes) if value else (yes, no)
                out.append((dead, f"({_text(live, data)})"))
        elif n.type == "if_statement":
            cond = n.child_by_field_name("condition")
            value = fold(cond.named_children[-1] if cond is not None and cond.named_children
                         else None, data, known)
            yes, no = n.child_by_field_name("consequence"), n.child_by_field_name("alternative")
            if value is not None and yes is not None:
                if not value:
                    out.append((yes, "{}"))
                elif no is not None:
                    out.append((no, "{}" if no.type != "else_clause" else "else {}"))
    return out


def _inside(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _callee_reads_no_pointer(arg: Node, data: bytes, root: Node, pointers: dict) -> bool:
    """Whether ``arg`` is passed to a function (``IndexPtrToOffset<int64_t>::get(i, info)``)
    every definition of which, in the source, names none of the pointer fields: it reads the
    struct's other fields only, which the port's copy of the struct still has."""
    args = arg.parent
    call = args.parent if args is not None and args.type == "argument_list" else None
    fn = call.child_by_field_name("function") if call is not None else None
    if fn is None or call.type != "call_expression":
        return False
    name = re.split(r"::", re.sub(r"<[^<>]*>", "", _text(fn, data)))[-1].strip()
    bodies = [d.child_by_field_name("body") for d in _walk(root)
              if d.type == "function_definition"
              and (_fn_name(d, data) or "").split("::")[-1].strip() == name]
    field = re.compile(r"(?:\.|->)\s*(?:" + "|".join(map(re.escape, pointers)) + r")\b")
    return bool(bodies) and all(b is not None and not field.search(_text(b, data))
                                for b in bodies)



def _cast_around(node: Node, data: bytes) -> tuple[Node, str | None]:
    """The cast expression around ``node`` and the element type it casts to, if any."""
    p = node.parent
    if p is not None and p.type == "parenthesized_expression":
        p = p.parent
    if p is not None and p.type == "argument_list" and p.named_child_count == 1:
        call = p.parent
        fn = call.child_by_field_name("function") if call is not None else None
        if fn is not None and fn.type == "template_function" and \
                _text(fn.child_by_field_name("name"), data) in _CASTS:
            args = fn.child_by_field_name("arguments")
            spelled = _text(args, data)[1:-1].strip() if args is not None else ""
            if spelled.endswith("*") and spelled.count("*") == 1:
                return call, spelled[:-1].strip()
    if p is not None and p.type == "cast_expression":
        spelled = _text(p.child_by_field_name("type"), data).strip()
        if spelled.endswith("*") and spelled.count("*") == 1:
            return p, spelled[:-1].strip()
    return node, None


def _struct_edits(root: Node, data: bytes, name: str, fields: list[dict]
                  ) -> list[tuple[int, int, str]]:
    """Each pointer field declaration of struct ``name`` rewritten as a uint64_t of the same
    size and alignment."""
    spec = next((n for n in _walk(root) if n.type in ("struct_specifier", "class_specifier")
                 and n.child_by_field_name("body") is not None
                 and n.child_by_field_name("name") is not None
                 and _text(n.child_by_field_name("name"), data) == name), None)
    if spec is None:
        return []
    edits = []
    pointer_names = {f["name"] for f in fields if f.get("dtype") == "pointer"}
    for decl in spec.child_by_field_name("body").named_children:
        if decl.type != "field_declaration":
            continue
        names = [_leaf(d, data) for d in decl.children_by_field_name("declarator")]
        if names and all(n in pointer_names for n in names):
            edits.append((decl.start_byte, decl.end_byte,
                          f"uint64_t {', '.join(names)}; /* a pointer field, flattened */"))
    return edits


def _leaf(declarator: Node, data: bytes) -> str:
    ids = [x for x in _walk(declarator) if x.type in ("field_identifier", "identifier")]
    return _text(ids[-1], data) if ids else ""


def _top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c in "<(["
        depth -= c in ">)]"
        if c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return parts + [text[start:].strip()]


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


class _Resolver:
    """A type as the kernel spells it, resolved to a scalar type name: through the kernel's
    own ``using``/``typedef`` aliases, its template arguments, members of a traits class
    template those name (``typename Ktraits::input_t``), and file-scope aliases."""

    def __init__(self, root: Node, data: bytes, kfn: Node, template: dict,
                 scalars: dict[str, str]):
        self.root, self.data, self.scalars = root, data, scalars
        # a dtype name back to a C type of it (the first one spelled: float32 -> float)
        self.dtype_names = {d: c for c, d in reversed(scalars.items())}
        self.local = aliases_in(kfn.child_by_field_name("body"), data)
        self.template = {k: str(v) for k, v in template.items()}
        self.file = aliases_in(root, data, top_only=True)

    def __call__(self, spelled: str) -> str | None:
        """A scalar type name, a CUDA vector's (``float2``), or None."""
        return self._resolve(spelled, self.local | self.template, 0)

    def scalar_of(self, resolved: str) -> str | None:
        """The scalar type of a resolved type: itself, or a CUDA vector's elements'."""
        m = _VECTOR.fullmatch(resolved)
        return self.dtype_names.get(_VECTOR_BASE[m[1]]) if m else resolved

    def _conditional(self, args: str, scope: dict[str, str], depth: int) -> str | None:
        """``std::conditional_t<c, A, B>`` (mamba's ``scan_t``: float2, or float4 for
        complex weights) without folding ``c``: A and B resolved, when they agree on their
        scalar type (all a flattened buffer needs; a vector view keeps its cast)."""
        parts = _top_level_split(args)
        if len(parts) != 3:
            return None
        a, b = (self._resolve(x, scope, depth + 1) for x in parts[1:])
        if a is None or b is None or self.scalar_of(a) != self.scalar_of(b):
            return None
        return a

    def _resolve(self, spelled: str, scope: dict[str, str], depth: int) -> str | None:
        t = " ".join(re.sub(r"\b(?:const|volatile|typename|struct|__restrict__)\b", " ",
                            spelled).split())
        if depth > 12 or not t:
            return None
        if t in self.scalars:
            return t
        if t in self.dtype_names:
            return self.dtype_names[t]
        if _VECTOR.fullmatch(t):
            return t
        if t in scope:
            return self._resolve(scope[t], self.local | self.template, depth + 1)
        cond = re.fullmatch(r"(?:std\s*::\s*)?conditional(?:_t\s*<(.*)>|\s*<(.*)>\s*::\s*type)",
                            t)
        if cond:
            return self._conditional(cond[1] or cond[2], scope, depth)
        if "::" in t:
            owner, member = t.rsplit("::", 1)
            owner_t = scope.get(owner, owner)
            owner_t = self.template.get(owner_t, owner_t)
            members = self._members(owner_t)
            if members is None or member not in members:
                return None
            inner_scope, target = members[member]
            return self._resolve(target, inner_scope, depth + 1)
        if t in self.file:
            return self._resolve(self.file[t], {}, depth + 1)
        return None

    def _members(self, spelled: str) -> dict[str, tuple[dict, str]] | None:
        """The type aliases a class (template) instance declares: member -> (the scope its
        template parameters give, the aliased type)."""
        name, args = template_parts(" ".join(spelled.split()))
        for n in _walk(self.root):
            if n.type not in ("struct_specifier", "class_specifier") or \
                    n.child_by_field_name("body") is None or \
                    n.child_by_field_name("name") is None or \
                    _text(n.child_by_field_name("name"), self.data) != name:
                continue
            scope: dict[str, str] = {}
            outer = n.parent
            if outer is not None and outer.type == "template_declaration":
                names = [_text(x, self.data) for p in outer.child_by_field_name(
                    "parameters").named_children for x in p.named_children
                    if x.type in ("type_identifier", "identifier")]
                scope = dict(zip(names, args, strict=False))
            members = aliases_in(n.child_by_field_name("body"), self.data, top_only=True)
            return {m: (scope, target) for m, target in members.items()}
        return None

