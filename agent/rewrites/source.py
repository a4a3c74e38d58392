"""The Metal text of a candidate as tree-sitter trees, for the mechanical rewrites: the header
parsed as a file, the body as the statements of a function (MLX's body has no signature), and
edits made by byte ranges of those trees. Metal's address spaces parse as small error nodes
(runners/sourcetree.py); the rewrites only match statements that parse cleanly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node

from corpus.candidate import Candidate
from runners.sourcetree import parse, walk

_OPEN = "void __kport_body() {\n"


@dataclass(frozen=True)
class Unit:
    """One parsed part of a candidate: ``part`` ('header' or 'body'), the parsed bytes and
    the offset of the part's own text in them."""

    part: str
    data: bytes
    root: Node
    offset: int

    def text(self, node: Node) -> str:
        """The source text of ``node``."""
        return self.data[node.start_byte:node.end_byte].decode()


def units(cand: Candidate) -> list[Unit]:
    """The header (when there is one) and the body of ``cand``, parsed."""
    out = []
    if cand.header.strip():
        data = cand.header.encode()
        out.append(Unit("header", data, parse(data, "cpp"), 0))
    data = (_OPEN + cand.body + "\n}\n").encode()
    out.append(Unit("body", data, parse(data, "cpp"), len(_OPEN.encode())))
    return out


def identifiers(cand: Candidate) -> set[str]:
    """Every identifier (and type or field name) the candidate's header and body use."""
    kinds = {"identifier", "type_identifier", "field_identifier", "namespace_identifier"}
    return {u.text(n) for u in units(cand) for n in walk(u.root) if n.type in kinds}


def strip(node: Node, unit: Unit) -> Node:
    """``node`` without enclosing parentheses and scalar casts (``float(x)``, ``(uint)x``,
    ``ushort(x)``): the value the expression passes on."""
    while True:
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif node.type == "cast_expression" and node.child_by_field_name("value"):
            node = node.child_by_field_name("value")
        elif (node.type == "call_expression"
              and unit.text(node.child_by_field_name("function")) in SCALAR_TYPES
              and node.child_by_field_name("arguments").named_child_count == 1):
            node = node.child_by_field_name("arguments").named_children[0]
        else:
            return node


SCALAR_TYPES = frozenset({"float", "half", "bfloat", "int", "uint", "short", "ushort", "char",
                          "uchar", "long", "ulong", "size_t"})


Edit = tuple[int, int, str]  # start and end byte in the unit's data, replacement text


def rewrite(cand: Candidate, edits_of: Callable[[Unit], list[Edit]]) -> Candidate | None:
    """``cand`` with the edits ``edits_of`` gives for each of its parts applied (non-
    overlapping byte ranges); None when no part has any."""
    parts = {"header": cand.header, "body": cand.body}
    changed = False
    for unit in units(cand):
        edits = sorted(edits_of(unit), reverse=True)
        if not edits:
            continue
        data = unit.data
        for start, end, new in edits:
            data = data[:start] + new.encode() + data[end:]
        text = data.decode()
        if unit.part == "body":
            text = text[len(_OPEN):-len("\n}\n")]
        parts[unit.part] = text
        changed = True
    if not changed:
        return None
    return cand.model_copy(update=parts)
