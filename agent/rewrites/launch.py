"""Launch sweeps: the threadgroup size and tile sizes of a port, keeping MLX's grid semantics
(the grid counts threads).

- ``template_sweeps``: an integer template parameter that is a power of two (``BLOCK``,
  ``TILE``, ``WARPS``) is doubled, halved, ... Every threadgroup dimension equal to it (or to
  32 times it: warps per group) follows it; the grid keeps its number of groups along a
  dimension whose group size changed, and a literal equal to the old value in the
  group-count part of a grid written ``(groups) * (threads per group)`` — how the translator
  writes a CUDA launch, whose template arguments it folds — takes the new value
  (``ceil_div(rows, 4)`` -> ``ceil_div(rows, 8)`` for ``WARPS`` 4 -> 8).
- ``threadgroup_sweeps``: a 1-D threadgroup no template parameter names. A kernel that uses
  nothing of its group (no group or SIMD positions, threadgroup memory, barriers or SIMD
  functions) keeps its grid: only the grouping of the same threads changes. One that reads
  ``threads_per_threadgroup`` gets the grid rewritten as a template's is (``ceil_div(n, 256)
  * 256`` -> ``ceil_div(n, 512) * 512``: the same threads for an index computed from its
  group; the same groups when the group count has no such literal). Any other is refused:
  its group size is baked into its code.

Variants over 1024 threads or 32 KB of threadgroup memory, or under one SIMD-group, are not
proposed (apple-gpu-facts F1-F3).

These are guesses about the kernel's work split that the harness judges: a variant that is
wrong at any size set is rejected and shown in the tree.
"""

from __future__ import annotations

import ast

from agent.rewrites.source import identifiers
from corpus.candidate import Candidate
from kb.tgmem import threadgroup_decls
from runners.errors import KportError
from runners.sizeexpr import evaluate

SIZES = (64, 128, 256, 512, 1024)
MAX_THREADS = 1024  # apple-gpu-facts F2
MAX_GROUP_BYTES = 32 * 1024  # F3
SIMD = 32  # F1: smaller groups leave SIMD lanes idle
GROUP_WORDS = frozenset({
    "threadgroup_position_in_grid", "threads_per_threadgroup", "thread_position_in_threadgroup",
    "thread_index_in_threadgroup", "threadgroups_per_grid", "simdgroup_index_in_threadgroup",
    "simdgroups_per_threadgroup", "thread_index_in_simdgroup", "threads_per_simdgroup",
    "threadgroup_barrier", "simdgroup_barrier", "threadgroup"})


def _values(exprs: list, case) -> list[int] | None:
    """The launch expressions' values, the same at every size set of the case; else None."""
    try:
        seen = {tuple(int(evaluate(e, s)) for e in exprs) for s in case.size_sets()}
    except KportError:
        return None
    return list(seen.pop()) + [1] * (3 - len(exprs)) if len(seen) == 1 else None


def _swap_literal(node: ast.expr, old: int, new: int) -> ast.expr:
    class Swap(ast.NodeTransformer):
        def visit_Constant(self, c):  # noqa: N802 - ast's visitor naming
            return ast.Constant(new) if c.value == old and type(c.value) is int else c
    return Swap().visit(node)


def regrid(expr, old_tg: int, new_tg: int, case, literal: tuple[int, int] | None = None):
    """One grid dimension for a group size ``old_tg`` -> ``new_tg`` at the same number of
    groups (``literal`` (old, new) also swapped in the group count of ``(groups) * (old_tg)``);
    None when the size changes and the grid is neither that form nor a multiple of ``old_tg``
    at every size set."""
    tree = ast.parse(str(expr), mode="eval").body
    if isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Mult) and \
            _values([ast.unparse(tree.right)], case) == [old_tg, 1, 1]:
        groups = _swap_literal(tree.left, *literal) if literal else tree.left
        return ast.unparse(ast.BinOp(groups, ast.Mult(), ast.Constant(new_tg)))
    if old_tg == new_tg:
        return expr
    try:
        if all(int(evaluate(expr, s)) % old_tg == 0 for s in case.size_sets()):
            return f"({expr}) // {old_tg} * {new_tg}"
    except KportError:
        pass
    return None


def _near(value: int, choices) -> list[int]:
    """``choices`` other than ``value``, nearest (by factors of two) first."""
    return sorted((c for c in choices if c != value),
                  key=lambda c: (abs(c.bit_length() - value.bit_length()), c < value))


def _group_bytes(cand: Candidate, template: dict) -> int:
    """Static threadgroup memory of the body with ``template`` (unknown sizes count 0)."""
    return sum(d.nbytes or 0 for d in threadgroup_decls(cand.body, template))


def template_sweeps(cand: Candidate, case) -> list[tuple[str, Candidate]]:
    """(action, candidate) for each power-of-two template parameter the kernel uses, at twice,
    half, four times and a quarter of its value, with the launch following it."""
    tg = _values(cand.threadgroup, case)
    used = identifiers(cand)
    out = []
    for name, value in cand.template.items():
        if type(value) is not int or value < 2 or value & (value - 1) or name not in used \
                or tg is None:
            continue
        tied = [d for d in range(3) if tg[d] == value] or \
            [d for d in range(3) if tg[d] == SIMD * value]
        for new in _near(value, [value * 4, value * 2, value // 2, value // 4]):
            if new < 1:
                continue
            new_tg = [tg[d] * new // value if d in tied else tg[d] for d in range(3)]
            threads = new_tg[0] * new_tg[1] * new_tg[2]
            if threads > MAX_THREADS or threads < min(SIMD, tg[0] * tg[1] * tg[2]) or \
                    _group_bytes(cand, {**cand.template, name: new}) > MAX_GROUP_BYTES:
                continue
            grid = []
            for d, expr in enumerate(cand.grid):
                grid.append(regrid(expr, tg[d], new_tg[d], case, (value, new)))
            if any(g is None for g in grid):
                continue
            out.append((f"template:{name}={new}", cand.model_copy(update={
                "template": {**cand.template, name: new}, "grid": grid,
                "threadgroup": [str(v) for v in new_tg[:len(cand.threadgroup)]]})))
    return out


def threadgroup_sweeps(cand: Candidate, case) -> list[tuple[str, Candidate]]:
    """(action, candidate) for each other threadgroup size of ``SIZES`` when the group is 1-D,
    no template parameter gives it and the kernel allows it (module docstring); else []."""
    tg = _values(cand.threadgroup, case)
    if tg is None or tg[1:] != [1, 1] or tg[0] in [v for v in cand.template.values()
                                                   if type(v) is int]:
        return []
    words = identifiers(cand)
    free = not (words & GROUP_WORDS) and not any(w.startswith(("simd_", "quad_"))
                                                 for w in words)
    if not free and "threads_per_threadgroup" not in words:
        return []
    out = []
    for size in _near(tg[0], SIZES):
        grid = list(cand.grid)
        if not free:
            grid[0] = regrid(cand.grid[0], tg[0], size, case, (tg[0], size))
            if grid[0] is None:
                return []
        out.append((f"threadgroup:{size}", cand.model_copy(update={
            "grid": grid, "threadgroup": [str(size), *cand.threadgroup[1:]]})))
    return out
