"""What a guessed case learns from the kernel's own body beyond its signature (issue 15), read
from the tree-sitter AST: the parameters it divides by one another (``T / B``: the host keeps
T a multiple of B), the integer inputs it reads as CSR offsets (``p[e]`` and ``p[e + 1]``, the
two ends of one segment), and which parameters it reads at all."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from agent.translate.macros import template_parts
from agent.translate.tree import _walk
from kb.parse import declarator_name
from runners.sourcetree import leaves, parse

_AXES = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class Offsets:
    """An integer input read as segment bounds. ``loop``: a segment bounds a loop (it indexes
    rows of another buffer); else a thread coordinate is tested against it, and ``coordinate``
    says which: ("block" | "thread" | "global", axis) or ("param", name), None if unknown."""

    name: str
    loop: bool
    coordinate: tuple[str, str | int] | None = None


@dataclass(frozen=True)
class KernelReads:
    quotients: frozenset[tuple[str, str]]  # (a, b): the body computes a / b or a % b
    offsets: tuple[Offsets, ...]
    read: frozenset[str]  # every identifier the body mentions


def read_kernel(src: str, kernel: str, params: list[str], integer_inputs: list[str]
                ) -> KernelReads:
    """The readings of ``kernel``'s body in ``src`` over its ``params``; offsets are looked for
    among ``integer_inputs``. An empty reading when the kernel's body is not found."""
    data = src.encode()
    body = _kernel_body(parse(data, "cuda"), data, template_parts(kernel)[0])
    if body is None:
        return KernelReads(frozenset(), (), frozenset())
    nodes = list(_walk(body))
    quotients = set()
    for n in nodes:
        if n.type == "binary_expression" and _operator(n, data) in ("/", "%"):
            a, b = (_bare(n.child_by_field_name(s)) for s in ("left", "right"))
            if a is not None and b is not None and a.type == b.type == "identifier" and \
                    _text(a, data) in params and _text(b, data) in params:
                quotients.add((_text(a, data), _text(b, data)))
    read = frozenset(_text(n, data) for n in nodes if n.type == "identifier")
    offsets = tuple(o for name in integer_inputs
                    if (o := _offsets(name, nodes, data, params)) is not None)
    return KernelReads(frozenset(quotients), offsets, read)


def _offsets(name: str, nodes: list[Node], data: bytes,
             params: list[str]) -> Offsets | None:
    """``name`` as segment bounds when the body reads ``name[e]`` and ``name[e + 1]``."""
    reads: dict[str, list[Node]] = {}
    for n in nodes:
        arg = n.child_by_field_name("argument") if n.type == "subscript_expression" else None
        if arg is not None and arg.type == "identifier" and _text(arg, data) == name:
            index = _bare(_index(n))
            if index is not None:
                reads.setdefault(_text(index, data), []).append(n)
    uppers = []
    for n in (n for group in reads.values() for n in group):
        index = _bare(_index(n))
        if index is not None and index.type == "binary_expression" and \
                _operator(index, data) == "+" and _text(index.child_by_field_name("right"), data) \
                == "1" and _text(index.child_by_field_name("left"), data) in reads:
            uppers.append(n)
    if not uppers:
        return None
    if any(_bounds_loop(u, nodes, data) for u in uppers):
        return Offsets(name, True)
    return Offsets(name, False, _coordinate(uppers[0], nodes, data, params))


def _bounds_loop(read: Node, nodes: list[Node], data: bytes) -> bool:
    """Whether ``read`` (or a local it initialises) sits in a for loop's condition."""
    if _in_loop_condition(read):
        return True
    local = _initialised(read, data)
    return local is not None and any(
        n.type == "identifier" and _text(n, data) == local and _in_loop_condition(n)
        for n in nodes)


def _coordinate(read: Node, nodes: list[Node], data: bytes,
                params: list[str]) -> tuple[str, str | int] | None:
    """The thread coordinate a segment bound is compared with (``n_x < ptr[b + 1]``, n_x =
    blockIdx.x): ("block" | "thread" | "global", axis), or ("param", name)."""
    up = read.parent
    while up is not None and up.type == "parenthesized_expression":
        up = up.parent
    if up is None or up.type != "binary_expression" or \
            _operator(up, data) not in ("<", "<=", ">", ">="):
        return None
    other = next((c for c in (up.child_by_field_name("left"), up.child_by_field_name("right"))
                  if c is not None and c.id != read.id), None)
    other = _bare(other)
    if other is None or other.type != "identifier":
        return None
    name = _text(other, data)
    if name in params:
        return ("param", name)
    init = next((_value_of(n) for n in nodes if n.type == "init_declarator"
                 and _declared(n, data) == name), None)
    if init is None:
        return None
    words = [_text(t, data) for t in leaves(init)]
    axis = next((_AXES[words[i + 2]] for i, w in enumerate(words[:-2])
                 if w in ("blockIdx", "threadIdx") and words[i + 1] == "."
                 and words[i + 2] in _AXES), 0)
    has_block, has_thread = "blockIdx" in words, "threadIdx" in words
    if has_block and has_thread:
        return ("global", axis)
    if has_block or has_thread:
        return ("block" if has_block else "thread", axis)
    return None


def _kernel_body(root: Node, data: bytes, name: str) -> Node | None:
    for n in _walk(root):
        if n.type == "function_definition" and declarator_name(n, data) == name and \
                any(c.type == "__global__" or _text(c, data) == "__global__"
                    for c in n.children):
            return n.child_by_field_name("body")
    return None


def _text(n: Node, data: bytes) -> str:
    """A node's tokens joined by single spaces (``b+1`` and ``b + 1`` read alike)."""
    return " ".join(data[t.start_byte:t.end_byte].decode(errors="replace") for t in leaves(n))


def _operator(n: Node, data: bytes) -> str:
    op = n.child_by_field_name("operator")
    return data[op.start_byte:op.end_byte].decode() if op is not None else ""


def _bare(n: Node | None) -> Node | None:
    """``n`` without parentheses and casts around it."""
    while n is not None and n.type in ("parenthesized_expression", "cast_expression"):
        n = n.child_by_field_name("value") if n.type == "cast_expression" else next(
            (c for c in n.named_children if c.type != "comment"), None)
    return n


def _index(subscript: Node) -> Node | None:
    indices = subscript.child_by_field_name("indices") or subscript.child_by_field_name("index")
    if indices is None:
        return None
    if indices.type != "subscript_argument_list":
        return indices
    named = [c for c in indices.named_children if c.type != "comment"]
    return named[0] if len(named) == 1 else None


def _in_loop_condition(n: Node) -> bool:
    child, up = n, n.parent
    while up is not None:
        if up.type == "for_statement":
            return child.id == getattr(up.child_by_field_name("condition"), "id", None)
        if up.type in ("function_definition", "compound_statement"):
            return False
        child, up = up, up.parent
    return False


def _initialised(n: Node, data: bytes) -> str | None:
    """The local ``n`` initialises (``const long end = p[b + 1];``), if any."""
    up = n.parent
    while up is not None and up.type in ("parenthesized_expression", "cast_expression"):
        up = up.parent
    if up is not None and up.type == "init_declarator":
        return _declared(up, data)
    return None


def _declared(init_declarator: Node, data: bytes) -> str | None:
    d = init_declarator.child_by_field_name("declarator")
    while d is not None and d.type != "identifier":
        d = d.child_by_field_name("declarator")
    return _text(d, data) if d is not None else None


def _value_of(init_declarator: Node) -> Node | None:
    return init_declarator.child_by_field_name("value")
