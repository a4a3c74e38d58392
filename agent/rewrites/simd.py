"""Shuffle trees to SIMD-group collectives: a loop over offsets 16, 8, 4, 2, 1 whose one
statement folds ``simd_shuffle_xor(v, off)`` or ``simd_shuffle_down(v, off)`` into ``v`` by
``+``, ``fmax``/``max`` or ``fmin``/``min`` becomes ``v = simd_sum(v)`` (``simd_max``,
``simd_min``): one instruction instead of five shuffles and five operations (apple-gpu-facts
F7, F9, rule 18).

Exactly a full-SIMD reduction or nothing: the loop must start at 16, halve down to 1, and fold
the shuffled value of the same variable with one of those operations; anything else (a struct,
a custom merge, partial widths) is left alone. The xor butterfly leaves the reduction in every
lane, as the collective does. A shuffle-down tree leaves it only in lane 0 (other lanes hold
partial sums), where the collective gives every lane the reduction: equal wherever the kernel
reads the result in lane 0; the harness judges the rest.
"""

from __future__ import annotations

from tree_sitter import Node

from agent.rewrites.source import Edit, Unit, rewrite, strip, walk
from corpus.candidate import Candidate

SHUFFLES = frozenset({"simd_shuffle_xor", "simd_shuffle_down"})
COLLECTIVE = {"+": "simd_sum", "fmax": "simd_max", "max": "simd_max", "fmin": "simd_min",
              "min": "simd_min"}


def _number(node: Node | None, unit: Unit) -> int | None:
    if node is None or node.type != "number_literal":
        return None
    text = unit.text(node).rstrip("uUlL")
    return int(text, 0) if text.isdigit() or text.startswith("0x") else None


def halving_counter(loop: Node, unit: Unit) -> str | None:
    """The counter of ``for (int o = 16; o > 0; o >>= 1)`` (also ``o >= 1``, ``o != 0``,
    ``o /= 2``, ``o = o >> 1``, ``o = o / 2``); None for any other loop."""
    init, cond, upd = (loop.child_by_field_name(f) for f in ("initializer", "condition",
                                                              "update"))
    if init is None or cond is None or upd is None or init.type != "declaration":
        return None
    decls = [c for c in init.named_children if c.type == "init_declarator"]
    if len(decls) != 1 or _number(decls[0].child_by_field_name("value"), unit) != 16:
        return None
    name = unit.text(decls[0].child_by_field_name("declarator"))
    if cond.type != "binary_expression" or unit.text(cond.child_by_field_name("left")) != name:
        return None
    bound = (unit.text(cond.child_by_field_name("operator")),
             _number(cond.child_by_field_name("right"), unit))
    if bound not in {(">", 0), (">=", 1), ("!=", 0)}:
        return None
    if upd.type != "assignment_expression" or unit.text(upd.child_by_field_name("left")) != name:
        return None
    op, right = unit.text(upd.child_by_field_name("operator")), upd.child_by_field_name("right")
    if (op, _number(right, unit)) in {(">>=", 1), ("/=", 2)}:
        return name
    if op == "=" and right.type == "binary_expression" and \
            unit.text(right.child_by_field_name("left")) == name and \
            (unit.text(right.child_by_field_name("operator")),
             _number(right.child_by_field_name("right"), unit)) in {(">>", 1), ("/", 2)}:
        return name
    return None


def _is_shuffle_of(node: Node, var: str, counter: str, unit: Unit) -> bool:
    """``node`` is ``simd_shuffle_xor|down(var, counter)`` (casts allowed around each)."""
    node = strip(node, unit)
    if node.type != "call_expression" or \
            unit.text(node.child_by_field_name("function")) not in SHUFFLES:
        return False
    args = node.child_by_field_name("arguments").named_children
    return (len(args) == 2 and unit.text(strip(args[0], unit)) == var
            and unit.text(strip(args[1], unit)) == counter)


def _fold(stmt: Node, counter: str, unit: Unit) -> tuple[str, str] | None:
    """(variable, collective) of a loop body folding the shuffled variable into itself."""
    while stmt.type == "compound_statement" and stmt.named_child_count == 1:
        stmt = stmt.named_children[0]
    if stmt.type != "expression_statement" or stmt.named_child_count != 1:
        return None
    expr = stmt.named_children[0]
    if expr.type != "assignment_expression":
        return None
    left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
    if left.type != "identifier":
        return None
    var, op = unit.text(left), unit.text(expr.child_by_field_name("operator"))
    if op == "+=":
        return (var, "simd_sum") if _is_shuffle_of(right, var, counter, unit) else None
    if op != "=":
        return None
    right = strip(right, unit)
    if right.type == "binary_expression" and unit.text(right.child_by_field_name("operator")) \
            == "+":
        pair = [right.child_by_field_name("left"), right.child_by_field_name("right")]
        how = "+"
    elif right.type == "call_expression" and \
            unit.text(right.child_by_field_name("function")) in COLLECTIVE:
        pair = right.child_by_field_name("arguments").named_children
        how = unit.text(right.child_by_field_name("function"))
    else:
        return None
    if len(pair) != 2:
        return None
    for mine, theirs in (pair, pair[::-1]):
        if unit.text(strip(mine, unit)) == var and _is_shuffle_of(theirs, var, counter, unit):
            return var, COLLECTIVE[how]
    return None


def _edits(unit: Unit) -> list[Edit]:
    edits = []
    for loop in walk(unit.root):
        if loop.type != "for_statement":
            continue
        counter = halving_counter(loop, unit)
        found = counter and _fold(loop.child_by_field_name("body"), counter, unit)
        if not found:
            continue
        start = loop.start_byte
        before = loop.prev_sibling
        if before is not None and before.type == "preproc_call" and \
                unit.text(before).split()[1:2] == ["unroll"]:
            start = before.start_byte  # `#pragma unroll` must not be left before a non-loop
        lines = unit.data[start:loop.end_byte].count(b"\n")
        var, fn = found
        indent = " " * loop.start_point[1] if start != loop.start_byte else ""
        edits.append((start, loop.end_byte, f"{indent}{var} = {fn}({var});" + "\n" * lines))
    return edits


def simd_collectives(cand: Candidate) -> Candidate | None:
    """``cand`` with every full-SIMD shuffle reduction loop replaced by the SIMD-group
    collective; None when it has none."""
    return rewrite(cand, _edits)
