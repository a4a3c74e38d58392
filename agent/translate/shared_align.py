"""``__shared__ __align__(N) T s[...];`` -> ``threadgroup __attribute__((aligned(N))) T s[...];``
(memory.shared_align_vector). CUDA's ``__align__(n)`` is ``__attribute__((aligned(n)))``;
the grammar reads the declaration as one of a type ``__align__`` with a broken parenthesized
declarator, so the declaration is rebuilt: the prefix spelled out, the rest (element type and
declarator) emitted node by node as usual."""

from __future__ import annotations

import re

from tree_sitter import Node

RULE = "memory.shared_align_vector"
_PREFIX = re.compile(rb"\s*__shared__\s+__align__\s*\(\s*(\w+)\s*\)")


def aligned_shared(emitter, node: Node) -> str | None:
    """The Metal text of ``node`` (a declaration) when it is an aligned ``__shared__`` array,
    else None; the emitter counts ``__align__`` and ``__shared__`` mapped."""
    data = emitter.data
    m = _PREFIX.match(data, node.start_byte, node.end_byte)
    if m is None:
        return None
    start = m.end()
    out, pos = [], start

    def walk(n: Node) -> None:
        nonlocal pos
        for c in n.children:
            if c.end_byte <= start:
                continue
            if c.start_byte >= start:
                out.append(data[pos:c.start_byte].decode(errors="replace"))
                out.append(emitter.emit(c))
                pos = c.end_byte
            else:
                walk(c)

    walk(node)
    out.append(data[pos:node.end_byte].decode(errors="replace"))
    emitter._mapped("__shared__", "memory.static_shared")
    emitter._mapped("__align__", RULE)
    return f"threadgroup __attribute__((aligned({m[1].decode()}))) " + "".join(out).lstrip()
