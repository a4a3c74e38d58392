"""Small readers of a tree-sitter C++/CUDA tree that the translator's modules share."""

from __future__ import annotations

from tree_sitter import Node

from kb.parse import declarator_name
from runners.sourcetree import walk as _walk  # noqa: F401 (the translator modules import it from here)


def _text(n: Node, data: bytes) -> str:
    return data[n.start_byte:n.end_byte].decode(errors="replace")


def _fn_name(fn: Node, data: bytes) -> str | None:
    return declarator_name(fn, data)


def _device_code(fn: Node, data: bytes) -> bool:
    """Can device code call it: __global__/__device__ or constexpr (host-only ones cannot)."""
    head = _text(fn, data).split("{", 1)[0].split()
    return any(w in head for w in ("__device__", "__global__", "constexpr"))


def aliases_in(node: Node, data: bytes, top_only: bool = False) -> dict[str, str]:
    """``using X = T;`` and ``typedef T X;`` in ``node`` (its direct children only, or
    anywhere in it): X -> T as spelled."""
    out: dict[str, str] = {}
    for a in (node.named_children if top_only else _walk(node)):
        if a.type == "alias_declaration" and a.child_by_field_name("name") is not None:
            out[_text(a.child_by_field_name("name"), data)] = _text(
                a.child_by_field_name("type"), data)
        elif a.type == "type_definition" and a.child_by_field_name("type") is not None:
            for d in a.children_by_field_name("declarator"):
                out[_text(d, data)] = _text(a.child_by_field_name("type"), data)
    return out
