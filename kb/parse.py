"""Tree-sitter parsing of kernel sources: CUDA (.cu/.cuh), Metal (.metal) and Python files that
hold ``metal_kernel(...)`` sources. Never regex parsing.

Metal is parsed with the C++ grammar: its address spaces and ``kernel`` keyword come out as
small error nodes around otherwise well-formed function definitions, which is enough to find
functions, their names, calls and tokens. A file is called malformed when error nodes cover more
than a quarter of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

from runners.sourcetree import leaves, parse

MALFORMED_ERROR_SHARE = 0.25


@dataclass(frozen=True)
class Token:
    text: str
    line: int  # 1-based


@dataclass(frozen=True)
class Function:
    """One function definition; ``kind`` is kernel (``__global__`` / Metal ``kernel``),
    device or host."""

    name: str
    kind: str
    start_line: int
    end_line: int
    text: str
    calls: frozenset[str]
    tokens: tuple[Token, ...] = field(repr=False)
    template: bool = False
    launch_bounds: bool = False


def error_share(root: Node) -> float:
    """Fraction of the source bytes covered by ERROR nodes (0 for a clean parse)."""
    if not root.has_error or root.end_byte == 0:
        return 0.0
    covered, stack = 0, [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            covered += node.end_byte - node.start_byte
        elif node.has_error:
            stack.extend(node.children)
    return covered / root.end_byte


def tokens(node: Node, data: bytes) -> list[Token]:
    """Leaf tokens under ``node`` in source order, comments dropped, literals kept whole."""
    return [Token(data[n.start_byte:n.end_byte].decode(errors="replace"), n.start_point[0] + 1)
            for n in leaves(node)]


def declarator_name(fn: Node, data: bytes) -> str | None:
    """The name a function definition declares (template arguments and scopes dropped)."""
    stack = [fn.child_by_field_name("declarator")] if fn.child_by_field_name("declarator") else []
    while stack:
        n = stack.pop()
        if n is None:
            continue
        if n.type == "function_declarator":
            d = n.child_by_field_name("declarator")
            if d is None:
                return None
            if d.type == "template_function":
                d = d.child_by_field_name("name") or d
            text = data[d.start_byte:d.end_byte].decode(errors="replace")
            return text.split("::")[-1]
        stack.extend(reversed(n.children))
    return None


def _calls(body: Node, data: bytes) -> frozenset[str]:
    names, stack = set(), [body]
    while stack:
        n = stack.pop()
        if n.type == "call_expression":
            f = n.child_by_field_name("function")
            if f is not None:
                if f.type == "template_function":
                    f = f.child_by_field_name("name") or f
                names.add(data[f.start_byte:f.end_byte].decode(errors="replace").split("::")[-1])
        stack.extend(n.children)
    return frozenset(names)


def _kind(fn: Node, data: bytes, language: str) -> str:
    head = []
    for c in fn.children:
        if c.type in ("function_declarator", "compound_statement"):
            break
        head.append(data[c.start_byte:c.end_byte].decode(errors="replace"))
    words = " ".join(head).replace("[[", " ").replace("]]", " ").split()
    if language == "metal":
        return "kernel" if "kernel" in words or "[[kernel]]" in head else "device"
    if "__global__" in words:
        return "kernel"
    return "device" if "__device__" in words else "host"


def functions(src: str, language: str) -> list[Function]:
    """Every function definition of a CUDA or Metal source, at any nesting (templates,
    namespaces, ``extern "C"`` blocks)."""
    data = src.encode()
    root = parse(data, "cpp" if language == "metal" else language)
    out: list[Function] = []
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, templated = stack.pop()
        if node.type == "function_definition":
            name = declarator_name(node, data)
            body = node.child_by_field_name("body")
            if name and body is not None:
                outer = node.parent if templated else node
                toks = tokens(outer, data)
                out.append(Function(
                    name=name, kind=_kind(node, data, language),
                    start_line=outer.start_point[0] + 1, end_line=node.end_point[0] + 1,
                    text=data[outer.start_byte:node.end_byte].decode(errors="replace"),
                    calls=_calls(body, data), tokens=tuple(toks), template=templated,
                    launch_bounds=any(c.type == "launch_bounds" for c in node.children)))
            continue
        for c in reversed(node.children):
            stack.append((c, node.type == "template_declaration"))
    out.sort(key=lambda f: f.start_line)
    return out



def kernel_names(funcs: list[Function]) -> list[str]:
    """The distinct names of the kernels among ``funcs`` (as functions() gives them), sorted:
    what a "kernels here: ..." message lists."""
    return sorted({f.name for f in funcs if f.kind == "kernel"})


def kernel_closure(kernel: Function, table: dict[str, Function], limit: int = 60) -> list[Function]:
    """``kernel`` and the non-kernel functions it calls, transitively (callees first),
    looked up in ``table`` by name; at most ``limit`` functions."""
    seen: dict[str, Function] = {}
    order: list[Function] = []

    def visit(fn: Function) -> None:
        for name in sorted(fn.calls):
            callee = table.get(name)
            if callee is None or callee.kind == "kernel" or name in seen or len(seen) >= limit:
                continue
            seen[name] = callee
            visit(callee)
            order.append(callee)

    seen[kernel.name] = kernel
    visit(kernel)
    return [*order, kernel]


@dataclass(frozen=True)
class PyMetalKernel:
    """A ``metal_kernel(name=..., source=..., header=...)`` call found in a Python file."""

    name: str
    source: str
    header: str
    line: int
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]


def _py_string(node: Node, data: bytes, strings: dict[str, str]) -> str | None:
    if node.type == "string":
        parts = [c for c in node.children if c.type == "string_content"]
        if any(c.type == "interpolation" for c in node.children):
            return None
        return "".join(data[c.start_byte:c.end_byte].decode(errors="replace") for c in parts)
    if node.type == "concatenated_string":
        pieces = [_py_string(c, data, strings) for c in node.children]
        return None if None in pieces else "".join(pieces)  # type: ignore[arg-type]
    if node.type == "identifier":
        return strings.get(data[node.start_byte:node.end_byte].decode())
    return None


def python_metal_kernels(src: str) -> list[PyMetalKernel]:
    """The ``metal_kernel`` calls of a Python source whose ``source`` is a string literal or a
    name bound to one in the same file."""
    data = src.encode()
    root = parse(data, "python")
    strings: dict[str, str] = {}
    calls: list[Node] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "assignment":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if left is not None and right is not None and left.type == "identifier":
                value = _py_string(right, data, strings)
                if value is not None:
                    strings[data[left.start_byte:left.end_byte].decode()] = value
        if n.type == "call":
            f = n.child_by_field_name("function")
            if f is not None and data[f.start_byte:f.end_byte].decode().endswith("metal_kernel"):
                calls.append(n)
        stack.extend(reversed(n.children))
    found: list[PyMetalKernel] = []
    for call in sorted(calls, key=lambda c: c.start_byte):
        kwargs: dict[str, Node] = {}
        args = call.child_by_field_name("arguments")
        for a in args.children if args is not None else []:
            if a.type == "keyword_argument":
                k, v = a.child_by_field_name("name"), a.child_by_field_name("value")
                if k is not None and v is not None:
                    kwargs[data[k.start_byte:k.end_byte].decode()] = v
        source = _py_string(kwargs["source"], data, strings) if "source" in kwargs else None
        if not source:
            continue
        name = _py_string(kwargs["name"], data, strings) if "name" in kwargs else None
        header = _py_string(kwargs["header"], data, strings) if "header" in kwargs else ""
        found.append(PyMetalKernel(
            name=name or f"metal_kernel_line{call.start_point[0] + 1}", source=source,
            header=header or "", line=call.start_point[0] + 1,
            input_names=_py_names(kwargs.get("input_names"), data),
            output_names=_py_names(kwargs.get("output_names"), data)))
    return found


def _py_names(node: Node | None, data: bytes) -> tuple[str, ...]:
    if node is None or node.type not in ("list", "tuple"):
        return ()
    return tuple(s for c in node.children if (s := _py_string(c, data, {})) is not None)
