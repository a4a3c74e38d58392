"""Names a CUDA kernel may use that its Metal port may not: an MSL keyword (``kernel``,
``device``, ``half`` ...), a name MLX's prelude declares (``complex_t``, ``Limits``) and, in
the kernel's own scope, a name MLX's generated signature declares (an attribute such as
``grid_size``, an input's ``x_shape``). Each such name the source declares is renamed in the
whole source before translation (``kernel`` -> ``kernel_kp``); the Translation then speaks of
its arguments by their CUDA names again and carries ``names`` (CUDA argument -> the Metal
buffer name) for the launch."""

from __future__ import annotations

import re

from tree_sitter import Node

from agent.translate.tree import _text, _walk
from kb.parse import parse
from runners.metal_sim.allowlist import KEYWORDS
from runners.metal_sim.codegen import ATTRIBUTES

# Words of MSL that C++ lacks (a CUDA identifier can be no C++ keyword): function qualifiers
# and address spaces (MSL spec 4, 5.1) and its scalar type names (2.1); KEYWORDS (what
# metal_sim refuses as an input name) holds most of them.
MSL_WORDS = frozenset(KEYWORDS | {"vertex", "fragment", "threadgroup_imageblock", "ray_data",
                                  "object_data"})
# Parameters MLX declares by searching the body for their names (mlx-metal-kernel.md 1.1):
# a body variable of the same name would declare it twice.
SIGNATURE_WORDS = frozenset(name for name, _ in ATTRIBUTES)
_SHAPE_SUFFIXES = ("_shape", "_strides", "_ndim")
# Names MLX's metal_kernel prelude declares at file scope (mlx-metal-kernel.md "Prelude":
# mlx/backend/metal/kernels/utils.h, complex.h, bf16.h, logging.h): a source's own type or
# variable of the same name (mamba's `using complex_t = c10::complex<float>`) would be
# declared twice in the port
PRELUDE_WORDS = frozenset({"float16_t", "bfloat16_t", "WorkPerThread", "Limits",
                           "LoopedElemToLoc", "ConditionalType", "complex_t", "is_complex_v",
                           "is_lane_convertible_v", "complex32_t", "complex64_t", "mlx"})
# MSL words CUDA code also uses undeclared, as types (cuda_fp16's half, glibc's uint): one is
# the user's name only where a declaration of it is in scope
_TYPE_WORDS = frozenset({"half", "bfloat", "uint", "ushort", "uchar"})
_SCOPES = ("translation_unit", "declaration_list", "compound_statement", "function_definition",
           "for_statement", "for_range_loop", "lambda_expression")
_TYPE_DECLS = ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier",
               "alias_declaration", "namespace_definition")
_TYPE_PARAMS = ("type_parameter_declaration", "optional_type_parameter_declaration",
                "variadic_type_parameter_declaration")


def _declared(root: Node, data: bytes) -> tuple[set[str], set[str]]:
    """(names declared as types or namespaces, names declared as anything else: variables,
    parameters, functions, fields, enumerators) anywhere in the tree."""
    types, values = set(), set()
    for n in _walk(root):
        if n.type in _TYPE_DECLS and n.child_by_field_name("name") is not None:
            types.add(_text(n.child_by_field_name("name"), data))
        elif n.type == "type_definition":
            types |= {_text(d, data) for d in n.children_by_field_name("declarator")
                      if d.type == "type_identifier"}
        elif n.type in _TYPE_PARAMS:
            types |= {_text(c, data) for c in n.named_children if c.type == "type_identifier"}
        elif n.type == "enumerator" and n.child_by_field_name("name") is not None:
            values.add(_text(n.child_by_field_name("name"), data))
        elif n.type in ("identifier", "field_identifier") and _declares(n):
            values.add(_text(n, data))
    return types, values


def _declares(n: Node) -> bool:
    """Whether identifier ``n`` is the name a declarator introduces (``int kernel``,
    ``float* kernel[4]``, ``void kernel(...)``, a field), not a use."""
    p = n.parent
    while p is not None and p.type in ("pointer_declarator", "reference_declarator",
                                       "array_declarator", "function_declarator",
                                       "parenthesized_declarator"):
        if p.child_by_field_name("declarator") is None:
            return False
        n, p = p, p.parent
    return p is not None and p.type in (
        "init_declarator", "declaration", "parameter_declaration",
        "optional_parameter_declaration", "field_declaration", "function_definition",
        "for_range_loop", "condition_clause") and p.child_by_field_name("declarator") == n


def plan(src: str) -> dict[str, str]:
    """CUDA name -> its Metal name, for each name ``src`` declares that the port cannot keep:
    an MSL word or a name MLX's prelude declares, and (declared as a variable or function) an
    MLX signature name or ``P_shape``/``P_strides``/``P_ndim`` of a pointer or scalar parameter
    ``P``. The new name (``kernel_kp``) is one the source does not declare."""
    data = src.encode()
    root = parse(data, "cuda")
    types, values = _declared(root, data)
    taken = types | values
    bad = {n for n in taken if n in MSL_WORDS or n in PRELUDE_WORDS}
    bad |= {n for n in values if n in SIGNATURE_WORDS or any(
        n.endswith(s) and n[:-len(s)] in values for s in _SHAPE_SUFFIXES)}
    out = {}
    for name in sorted(bad):
        new = f"{name}_kp"
        while new in taken or new in out.values():
            new += "_"
        out[name] = new
    return out


def rename(src: str, renames: dict[str, str]) -> str:
    """``src`` with each name of ``renames`` spelled anew where it is the user's name: as a
    variable, function, field or enumerator everywhere, as a type where the source declares
    a type so named (a CUDA type the port keeps, ``half``, is left alone), and inside macro
    bodies. Lines and columns before each name are kept (the text only grows)."""
    if not renames:
        return src
    data = src.encode()
    root = parse(data, "cuda")
    types, _ = _declared(root, data)
    scopes = _scope_names(root, data) if _TYPE_WORDS & set(renames) else {}
    edits = []
    for n in _walk(root):
        word = _text(n, data) if n.child_count == 0 else ""
        if n.type in ("identifier", "field_identifier") and word in renames or \
                n.type in ("type_identifier", "namespace_identifier") and word in renames \
                and word in types:
            typed = n.type == "identifier" and word in _TYPE_WORDS
            edits.append((n.start_byte, n.end_byte, renames[word], n if typed else None))
        elif n.type == "preproc_arg":  # a macro's body is text to tree-sitter
            text = re.sub(r"\b(" + "|".join(map(re.escape, renames)) + r")\b",
                          lambda m: renames[m[1]], _text(n, data))
            edits.append((n.start_byte, n.end_byte, text, None))
    out = bytearray(data)
    edits = [e for e in edits if e[3] is None or _in_scope(e[3], _text(e[3], data), scopes)]
    for start, end, text, _ in sorted(edits, key=lambda e: e[0], reverse=True):
        out[start:end] = text.encode()
    return out.decode(errors="replace")


def _scope_of(n: Node) -> Node | None:
    """The scope a declaring identifier's name belongs to: a parameter's is its function, a
    function's name the scope around the function, a variable's the nearest block."""
    p, params = n.parent, False
    while p is not None and p.type not in _SCOPES:
        params = params or p.type == "parameter_list"
        p = p.parent
    if p is not None and p.type == "function_definition" and not params:
        return _scope_of(p)
    return p


def _scope_names(root: Node, data: bytes) -> dict[tuple[int, int], set[str]]:
    """(start, end) of each scope -> the names declared directly in it."""
    out: dict[tuple[int, int], set[str]] = {}
    for n in _walk(root):
        if n.type == "identifier" and _declares(n) and (s := _scope_of(n)) is not None:
            out.setdefault((s.start_byte, s.end_byte), set()).add(_text(n, data))
    return out


def _in_scope(n: Node, word: str, scopes: dict[tuple[int, int], set[str]]) -> bool:
    """Whether a declaration of ``word`` is in scope at identifier ``n``."""
    p = n
    while p is not None:
        if word in scopes.get((p.start_byte, p.end_byte), ()):
            return True
        p = p.parent
    return False


def rename_spec(kernel: str, renames: dict[str, str]) -> str:
    """A kernel's name with template arguments (``k<device, 4>``) in the renamed source's
    spelling; a type word (``k<half>``) stays CUDA's type."""
    return re.sub(r"\w+", lambda m: m[0] if m[0] in _TYPE_WORDS else renames.get(m[0], m[0]),
                  kernel)


def restore_words(text: str, renames: dict[str, str]) -> str:
    """``text`` (a note, a TODO) with each renamed name spelled as the CUDA source has it."""
    if not renames:
        return text
    back = {new: old for old, new in renames.items()}
    return re.sub(r"\b(" + "|".join(map(re.escape, back)) + r")\b", lambda m: back[m[1]], text)


def restore(tr, renames: dict[str, str]) -> None:
    """Give ``tr`` (a Translation of the renamed source) its arguments' CUDA names back:
    inputs, outputs, roles and the rest speak of ``kernel`` again, notes and TODOs too, and
    ``tr.names`` maps each MLX argument whose Metal name differs to that name
    (``kernel`` -> ``kernel_kp``, an in-place ``device_out`` -> ``device_kp_out``). The
    template flag of an optional input is renamed in the Metal text as well (its name is
    ``KP_HAS_`` and the argument's, as the case's template reads it)."""
    if not renames:
        return
    back = {new: old for old, new in renames.items()}

    def cuda(name: str) -> str:
        if name in back:
            return back[name]
        base = name.removesuffix("_out")
        return f"{back[base]}_out" if base != name and base in back else name

    tr.names = {cuda(n): n for n in [*tr.inputs, *tr.outputs] if cuda(n) != n}
    tr.kernel = restore_words(tr.kernel, renames)
    tr.inputs, tr.outputs = [cuda(n) for n in tr.inputs], [cuda(n) for n in tr.outputs]
    tr.nullable = [cuda(n) for n in tr.nullable]
    for attr in ("roles", "dtypes", "defaults"):
        setattr(tr, attr, {cuda(k): v for k, v in getattr(tr, attr).items()})
    tr.structs = {cuda(k): (restore_words(ty, renames), _fields(fields, back))
                  for k, (ty, fields) in tr.structs.items()}
    tr.struct_problems = {cuda(k): restore_words(v, renames)
                          for k, v in tr.struct_problems.items()}
    tr.flat = {cuda(k): ".".join(back.get(p, p) for p in v.split("."))
               for k, v in tr.flat.items()}
    tr.notes = [restore_words(t, renames) for t in tr.notes]
    tr.guessed = [restore_words(t, renames) for t in tr.guessed]
    tr.todos = [type(t)(t.rule, restore_words(t.construct, renames), t.line, t.file, t.metal)
                for t in tr.todos]
    flags = {f"KP_HAS_{new}": f"KP_HAS_{old}" for old, new in renames.items()
             if f"KP_HAS_{new}" in tr.template}
    if flags:
        tr.template = {flags.get(k, k): v for k, v in tr.template.items()}
        pattern = re.compile(r"\b(" + "|".join(flags) + r")\b")
        tr.body = pattern.sub(lambda m: flags[m[1]], tr.body)
        tr.header = pattern.sub(lambda m: flags[m[1]], tr.header)


def _fields(fields: list[dict], back: dict[str, str]) -> list[dict]:
    """A struct's field list (analyze.struct_fields) with the CUDA field names."""
    return [{**f, "name": back.get(f["name"], f["name"]),
             **({"fields": _fields(f["fields"], back)} if "fields" in f else {})}
            for f in fields]
