"""Unrolling: ``#pragma unroll`` (an MSL pragma, runners/metal_sim/allowlist.toml) before each
loop with a compile-time trip count that has none: ``for (int i = A; i < B; i += C)`` (``<=``,
``++i``, ``i++`` too) where A, B and C are literals, template parameters or ``constexpr``
names of the same text. The compiler unrolls it in full; the loop's meaning is unchanged.
"""

from __future__ import annotations

from tree_sitter import Node

from agent.rewrites.source import Edit, Unit, rewrite, walk
from corpus.candidate import Candidate


def _constants(unit: Unit) -> set[str]:
    """Names declared ``constexpr`` in the unit."""
    names = set()
    for decl in walk(unit.root):
        if decl.type == "declaration" and any(unit.text(c) == "constexpr"
                                              for c in decl.children):
            names |= {unit.text(c.child_by_field_name("declarator"))
                      for c in decl.named_children if c.type == "init_declarator"}
    return names


def _constant(node: Node | None, unit: Unit, known: set[str]) -> bool:
    if node is None:
        return False
    if node.type in {"number_literal", "identifier"}:
        return node.type == "number_literal" or unit.text(node) in known
    if node.type in {"binary_expression", "parenthesized_expression"}:
        return all(_constant(c, unit, known) for c in node.named_children)
    return False


def constant_trip(loop: Node, unit: Unit, known: set[str]) -> bool:
    """Whether ``loop`` counts an int from one constant to another by a constant step."""
    init, cond, upd = (loop.child_by_field_name(f) for f in ("initializer", "condition",
                                                              "update"))
    if init is None or cond is None or upd is None or init.type != "declaration":
        return False
    decls = [c for c in init.named_children if c.type == "init_declarator"]
    if len(decls) != 1 or not _constant(decls[0].child_by_field_name("value"), unit, known):
        return False
    name = unit.text(decls[0].child_by_field_name("declarator"))
    if cond.type != "binary_expression" or unit.text(cond.child_by_field_name("left")) != name \
            or unit.text(cond.child_by_field_name("operator")) not in {"<", "<="} \
            or not _constant(cond.child_by_field_name("right"), unit, known):
        return False
    if upd.type == "update_expression":
        return unit.text(upd).replace(name, "") == "++"
    return upd.type == "assignment_expression" and \
        unit.text(upd.child_by_field_name("left")) == name and \
        unit.text(upd.child_by_field_name("operator")) == "+=" and \
        _constant(upd.child_by_field_name("right"), unit, known)


def _edits(unit: Unit, template: set[str]) -> list[Edit]:
    known = template | _constants(unit)
    edits = []
    for loop in walk(unit.root):
        if loop.type != "for_statement" or loop.parent is None or \
                loop.parent.type != "compound_statement":
            continue
        before = loop.prev_sibling
        if before is not None and before.type == "preproc_call":
            continue
        if constant_trip(loop, unit, known):
            indent = " " * loop.start_point[1]
            edits.append((loop.start_byte, loop.start_byte, f"#pragma unroll\n{indent}"))
    return edits


def unroll_loops(cand: Candidate) -> Candidate | None:
    """``cand`` with ``#pragma unroll`` before every constant-trip loop lacking a pragma;
    None when there is none."""
    names = {k for k, v in cand.template.items() if type(v) is int}
    return rewrite(cand, lambda unit: _edits(unit, names))
