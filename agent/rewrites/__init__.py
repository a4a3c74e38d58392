"""Mechanical rewrites of a correct Metal port: the offline optimiser's actions (issue 20).

Each rewrite is a small function of a candidate that returns the rewritten candidate, or
nothing when it does not apply: SIMD-group collectives for shuffle trees (``simd``), barrier
flags narrowed where the analysis proves it safe (``barriers``), ``#pragma unroll`` on
constant-trip loops (``unroll``), vector loads and stores for elementwise kernels
(``vectors``), template (tile, block) and threadgroup size sweeps
(``launch``). They work on tree-sitter trees of the Metal text (``source``). None of them is
trusted: every candidate goes through the harness, and a wrong one is rejected.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
from dataclasses import dataclass

from agent.rewrites.barriers import narrow_barriers
from agent.rewrites.launch import template_sweeps, threadgroup_sweeps
from agent.rewrites.simd import simd_collectives
from agent.rewrites.unroll import unroll_loops
from agent.rewrites.vectors import TITLE as VECTOR_TITLE
from agent.rewrites.vectors import vector_accesses
from corpus.candidate import Candidate

# action id, what it does (the tree and the report show it), the source rewrite
SOURCE_REWRITES = (
    ("simd_collectives", "shuffle trees -> simd_sum/simd_max/simd_min", simd_collectives),
    ("narrow_barriers", "barrier flags -> mem_threadgroup (no output is read)", narrow_barriers),
    ("unroll", "#pragma unroll on constant-trip loops", unroll_loops),
)


@dataclass(frozen=True)
class Proposal:
    """One rewrite of a candidate: its action id (``template:BLOCK=512``), a title and the
    rewritten candidate (origin ``opt:<action>``)."""

    action: str
    title: str
    candidate: Candidate


def _canonical(expr) -> str:
    """A launch expression spelt one way: ``(rows) * (256)`` and ``rows * 256`` alike."""
    try:
        return ast.unparse(ast.parse(str(expr), mode="eval"))
    except SyntaxError:
        return str(expr)


def fingerprint(cand: Candidate) -> str:
    """A short hash of what makes a candidate run differently: text and launch."""
    data = cand.model_dump(include={"body", "header", "template"})
    data |= {k: [_canonical(e) for e in getattr(cand, k)] for k in ("grid", "threadgroup")}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


MIN_SIZE_SETS_FOR_SWEEPS = 2


def propose(cand: Candidate, case) -> list[Proposal]:
    """Every mechanical rewrite that applies to ``cand``, in the order the search tries
    them: source rewrites, then the sweeps (nearest values first)."""
    out = []
    for action, title, fn in SOURCE_REWRITES:
        new = fn(cand)
        if new is not None:
            out.append(Proposal(action, title, new))
    # A sweep or the vector rewrite changes how the launch splits the work, which only the
    # harness judges: at one size set a wrong split can pass by luck (llama.cpp's ssm_conv
    # with split_d_inner doubled passed at its given sizes and read out of bounds at others),
    # so they need two, and the optimise phase checks them at held-out sizes too.
    splits = len(case.size_sets()) >= MIN_SIZE_SETS_FOR_SWEEPS
    new = vector_accesses(cand, case) if splits else None
    if new is not None:
        out.append(Proposal("vector_accesses", VECTOR_TITLE, new))
    by_knob: dict[str, list] = {}
    sweeps = template_sweeps(cand, case) + threadgroup_sweeps(cand, case) if splits else []
    for action, new in sweeps:
        by_knob.setdefault(action.split("=")[0], []).append((action, new))
    # round robin over the knobs, so each one's nearest values come first
    for action, new in [x for row in itertools.zip_longest(*by_knob.values()) for x in row
                        if x is not None]:
        title = ("template (tile, block) sweep" if action.startswith("template:")
                 else "threadgroup size sweep")
        out.append(Proposal(action, title, new))
    return [Proposal(p.action, p.title,
                     p.candidate.model_copy(update={"origin": f"opt:{p.action}"}))
            for p in out]
