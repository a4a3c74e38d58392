"""Small readers of a tree-sitter C++/CUDA tree that the translator's modules share."""

from __future__ import annotations

from tree_sitter import Node

from kb.parse import declarator_name


def _text(n: Node, data: bytes) -> str:
    return data[n.start_byte:n.end_byte].decode(errors="replace")


def _walk(node: Node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _fn_name(fn: Node, data: bytes) -> str | None:
    return declarator_name(fn, data)


def _device_code(fn: Node, data: bytes) -> bool:
    """Can device code call it: __global__/__device__ or constexpr (host-only ones cannot)."""
    head = _text(fn, data).split("{", 1)[0].split()
    return any(w in head for w in ("__device__", "__global__", "constexpr"))
