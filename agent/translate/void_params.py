"""The element type of a ``void *`` kernel parameter, read from the casts its accesses go
through: ggml's ``*(const float *) ((const char *) src0 + i*nb01)`` makes ``src0`` an array of
float addressed in bytes. The byte arithmetic is kept as written (the strides ``nb..`` stay
bytes): the port computes the same addresses on a ``device char *`` and casts the sum to
``device float *``, as the CUDA code does."""

from __future__ import annotations

from tree_sitter import Node

from agent.translate.tree import _text, _walk
from runners.cuda_sim.reading import line_origins

# What a pointer is cast to for byte arithmetic, not to read elements of a type.
BYTE_TYPES = {"char", "signed char", "unsigned char", "int8_t", "uint8_t", "void"}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}
# Expressions a pointer passes through on its way to an access: an access's cast is the
# outermost one among them (`(const float *) ((const char *) p + k)`).
_THROUGH = ("parenthesized_expression", "binary_expression", "cast_expression",
            "call_expression", "argument_list")
UNSEEN = "?"  # a use kport cannot follow: the pointer handed to a function uncast


def _pointee(type_node: Node | None, data: bytes) -> str | None:
    """``float`` for a type descriptor ``const float *``; None unless one level of pointer."""
    if type_node is None:
        return None
    text = _text(type_node, data)
    if text.count("*") != 1 or not text.rstrip().endswith("*"):
        return None
    return " ".join(w for w in text.replace("*", " ").split() if w not in _QUALIFIERS)


def _cast_target(node: Node, operand: Node, data: bytes) -> str | None:
    """The pointee ``node`` casts ``operand`` to: ``(T *) operand`` or
    ``reinterpret_cast<T *>(operand)`` (static_cast, const_cast alike); None otherwise."""
    if node.type == "cast_expression" and node.child_by_field_name("value") == operand:
        return _pointee(node.child_by_field_name("type"), data)
    if node.type == "call_expression":
        fn = node.child_by_field_name("function")
        if fn is not None and fn.type == "template_function" and \
                _text(fn.child_by_field_name("name"), data).endswith("_cast"):
            args = fn.child_by_field_name("arguments")
            return _pointee(args.named_children[0] if args and args.named_children else None,
                            data)
    return None


def _access(use: Node, data: bytes) -> tuple[str | None, Node]:
    """(the outermost pointer type ``use`` is cast to on its way up, the node where the way
    ends): the pointee an access through it reads, or None when it is never cast."""
    node, cast = use, None
    while node.parent is not None and node.parent.type in _THROUGH:
        parent = node.parent
        if parent.type == "binary_expression" and _text(
                parent.child_by_field_name("operator"), data) not in ("+", "-"):
            break
        if parent.type == "argument_list":  # only a cast's operand goes on
            call = parent.parent
            if call is None or _cast_target(call, node, data) is None:
                break
            cast, node = _cast_target(call, node, data), call
            continue
        if parent.type == "call_expression":
            break
        target = _cast_target(parent, node, data)
        cast = target if target is not None else cast
        node = parent
    return cast, node


def element_types(body: Node, data: bytes, names: list[str]) -> dict[str, list[tuple[str, int]]]:
    """For each ``void *`` parameter of ``names``: every element type its accesses read it
    as, with the (0-based) line of each, in the order of the source: ``(const float *) p``,
    ``(const float *) ((const char *) p + off)``, and the same through a local pointer
    initialised from it (``const char * row = (const char *) p + i*nb1;``). An access
    through a byte pointer alone reads bytes (``char``); the pointer handed uncast to a
    function is UNSEEN; another use (a null test, a comparison) says nothing."""
    owner = {n: n for n in names}  # a local pointer viewing a parameter -> the parameter
    found: dict[str, list[tuple[str, int]]] = {n: [] for n in names}
    for n in _walk(body):
        if n.type != "init_declarator":
            continue
        decl, value = n.child_by_field_name("declarator"), n.child_by_field_name("value")
        if decl is None or value is None or decl.type != "pointer_declarator":
            continue
        roots = [x for x in _walk(value) if x.type == "identifier" and _text(x, data) in owner]
        if not roots:
            continue
        cast, end = _access(roots[0], data)
        if end != value:
            continue
        local = next(x for x in _walk(decl) if x.type == "identifier")
        kind = " ".join(_text(c, data) for c in n.parent.named_children
                        if c.type in ("primitive_type", "type_identifier",
                                      "sized_type_specifier")) if n.parent else ""
        elem = kind or cast
        param = owner[_text(roots[0], data)]
        if elem and elem not in BYTE_TYPES:
            found[param].append((elem, n.start_point[0]))
        else:  # a byte view: its accesses say the type
            owner[_text(local, data)] = param
    for n in _walk(body):
        if n.type != "identifier" or _text(n, data) not in owner or _declaring(n):
            continue
        cast, end = _access(n, data)
        p = end.parent
        if p is not None and p.type == "init_declarator" and \
                p.child_by_field_name("value") == end:
            continue  # a view's declaration: counted above
        read = p is not None and (p.type == "subscript_expression" and
                                  p.child_by_field_name("argument") == end or
                                  p.type == "pointer_expression" and
                                  _text(p, data).startswith("*"))
        if cast is not None and cast not in BYTE_TYPES:
            found[owner[_text(n, data)]].append((cast, n.start_point[0]))
        elif read:
            found[owner[_text(n, data)]].append(("char", n.start_point[0]))
        elif p is not None and p.type == "argument_list" and cast is None:
            found[owner[_text(n, data)]].append((UNSEEN, n.start_point[0]))
    return found


def _declaring(n: Node) -> bool:
    """Whether identifier ``n`` is the name a declaration introduces."""
    child, p = n, n.parent
    while p is not None and p.type in ("pointer_declarator", "reference_declarator",
                                       "array_declarator"):
        child, p = p, p.parent
    return p is not None and p.type in ("init_declarator", "declaration",
                                        "parameter_declaration") and \
        p.child_by_field_name("declarator") == child


def resolve(params: list, body: Node, data: bytes, where: str) -> tuple[str, list[str]]:
    """Give each ``void *`` parameter of ``params`` (analyze.Param) the element type its
    accesses agree on (``float`` for pad_reflect_1d's ``src0``). Returns (why one cannot be
    ported: casts to two element types, naming the parameter, file and line; "" when none,
    notes on each left ``void``: handed uncast to a function, whose reads kport does not
    follow, so only a case.toml can give its dtype). A parameter never accessed stays
    ``void`` without a note."""
    voids = [p for p in params if p.pointer and p.type == "void"]
    if not voids:
        return "", []
    found = element_types(body, data, [p.name for p in voids])
    origin = line_origins(data.decode(errors="replace"), where)
    notes = []
    for p in voids:
        seen = found[p.name]
        types = sorted({t for t, _ in seen} - {UNSEEN})
        if len(types) > 1:
            first = next(ln for t, ln in seen if t not in (seen[0][0], UNSEEN))
            return (f"{_at(origin, first)}: void * parameter {p.name!r} is read as "
                    f"{' and as '.join(types)}: kport ports a void * whose accesses agree on "
                    "one element type (a cast to T *, possibly after char * byte "
                    "arithmetic)"), []
        if any(t == UNSEEN for t, _ in seen):
            line = next(ln for t, ln in seen if t == UNSEEN)
            notes.append(f"{p.name}: a void * handed uncast to a function at "
                         f"{_at(origin, line)}, so its element type is not known")
        elif types:
            p.type = types[0]
    return "", notes


def _at(origin: list[tuple[str, int]], line: int) -> str:
    file, number = origin[line] if line < len(origin) else ("<source>", line + 1)
    return f"{file}:{number}"
