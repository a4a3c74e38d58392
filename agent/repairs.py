"""Offline repairs: the fixes kport can apply to a candidate without an LLM, each keyed by the
fix rule (kb/rules/fixes) or lint (kb.lints) that diagnoses the problem. Edits are made on
tree-sitter tokens, never inside comments or longer names. Anything not in this table needs an
LLM or a person, and the agent says so rather than guessing.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.restage import share_storage
from agent.retile import retile
from corpus.candidate import Candidate
from kb.fixes import match_fixes
from runners.srcrewrite import tokenize

_STRONG_ORDERS = {"memory_order_seq_cst", "memory_order_acquire", "memory_order_release",
                  "memory_order_acq_rel"}


def _replace_tokens(text: str, mapping: Callable[[str], str | None]) -> str:
    """``text`` with each token for which ``mapping`` returns a string replaced by it."""
    out, pos = [], 0
    for t in tokenize(text):
        new = mapping(t.text)
        if new is not None:
            out += [text[pos:t.start], new]
            pos = t.end
    return "".join(out) + text[pos:]


def _in_body_and_header(candidate: Candidate, mapping) -> Candidate | None:
    body = _replace_tokens(candidate.body, mapping)
    header = _replace_tokens(candidate.header, mapping)
    if body == candidate.body and header == candidate.header:
        return None
    return candidate.model_copy(update={"body": body, "header": header})


def relax_memory_order(candidate: Candidate, case) -> Candidate | None:
    """Metal atomics take memory_order_relaxed only (F12)."""
    return _in_body_and_header(candidate, lambda t: "memory_order_relaxed"
                               if t in _STRONG_ORDERS else None)


def float_for_double(candidate: Candidate, case) -> Candidate | None:
    """Apple GPUs have no fp64 (F11): compute in float; the check decides if that is close
    enough."""
    return _in_body_and_header(candidate, lambda t: "float" if t == "double" else None)


def barrier_flags(candidate: Candidate, case) -> Candidate | None:
    """``threadgroup_barrier()`` without flags -> with mem_flags::mem_threadgroup."""
    body = candidate.body.replace("threadgroup_barrier()",
                                  "threadgroup_barrier(mem_flags::mem_threadgroup)")
    return None if body == candidate.body else candidate.model_copy(update={"body": body})


def atomic_outputs(candidate: Candidate, case) -> Candidate | None:
    """An atomic function on an output needs MLX's atomic_outputs=True (outputs start at 0,
    as a cudaMemset before the launch would)."""
    if candidate.atomic_outputs:
        return None
    init = candidate.init_value
    return candidate.model_copy(update={"atomic_outputs": True,
                                        "init_value": 0.0 if init is None else init})


def init_outputs(candidate: Candidate, case) -> Candidate | None:
    """An output the kernel leaves partly unwritten: CUDA's buffer started as the case's
    ``init`` (zeros, ones, full:V: what the host fills it with), MLX's starts undefined;
    init_value gives it the same start (one value for every output, as MLX has it)."""
    if candidate.init_value is not None:
        return None
    starts = {1.0 if a.init == "ones" else 0.0 if a.init == "zeros" else
              float(a.init.split(":")[1]) if a.init.startswith("full:") else None
              for a in case.args if a.role == "out"}
    if len(starts) != 1 or None in starts:
        return None
    return candidate.model_copy(update={"init_value": starts.pop()})


def fit_threadgroup_memory(candidate: Candidate, case) -> Candidate | None:
    """Threadgroup memory over 32 KB: a tile staged in another's storage after its last reader
    (agent/restage.py: the work and its decomposition stay the same), else a tiling template
    parameter halved (agent/retile.py); None when neither makes the port fit."""
    return share_storage(candidate, case) or retile(candidate, case)


# fix rule or lint id -> repair. "check.unwritten_output" is the comparison's own message.
REPAIRS: dict[str, Callable[[Candidate, object], Candidate | None]] = {
    "compiler.memory_order": relax_memory_order,
    "atomics.memory_order": relax_memory_order,
    "compiler.fp64": float_for_double,
    "types.fp64": float_for_double,
    "types.barrier_flags": barrier_flags,
    "mlx.atomic_needs_atomic_outputs": atomic_outputs,
    "check.unwritten_output": init_outputs,
    # threadgroup memory over 32 KB: a tile staged in another's storage, or re-tiled
    "tgmem.over_limit": fit_threadgroup_memory,
    "run.threadgroup_memory_limit": fit_threadgroup_memory,
}


def diagnosis_ids(messages: list[str], lints: list[dict]) -> list[str]:
    """Fix-rule ids matching ``messages`` (most specific first), then error lint ids, then
    ``check.unwritten_output`` when a comparison found unwritten (NaN) output elements."""
    ids: list[str] = []
    for msg in messages:
        ids += [r.id for r in match_fixes(msg) if r.id not in ids]
    ids += [x["id"] for x in lints if x["severity"] == "error" and x["id"] not in ids]
    if any("unwritten output" in m for m in messages):
        ids.append("check.unwritten_output")
    return ids


def repair_id(origin: str) -> str | None:
    """The repair id an attempt's origin names (``repair:<id>`` or ``repair:<id> (detail)``);
    None for any other origin."""
    if not origin.startswith("repair:"):
        return None
    return origin.removeprefix("repair:").split(" (", 1)[0]


def mechanical_repair(candidate: Candidate, case, ids: list[str],
                      tried: set[str]) -> tuple[Candidate, str] | None:
    """The first repair in ``ids`` order that changes ``candidate`` and was not tried yet:
    (repaired candidate with origin ``repair:<id>``, id); None when kport has none."""
    for rid in ids:
        fn = REPAIRS.get(rid)
        if fn is None or rid in tried:
            continue
        fixed = fn(candidate, case)
        if fixed is not None:  # a repair may say what it did ("detail:...": the tile, parameter)
            detail = fixed.origin.removeprefix("detail:") if fixed.origin.startswith(
                "detail:") else ""
            origin = f"repair:{rid}" + (f" ({detail})" if detail else "")
            return fixed.model_copy(update={"origin": origin}), rid
    return None


def with_repairs(case, candidate: Candidate, check, rounds: int = 4):
    """(the candidate, its outcomes) after the mechanical repairs ``kport port --offline``
    applies in turn while a check fails: ``check(candidate)`` gives a list of
    corpus.check.Outcome. For measurements of the offline path outside the agent graph
    (evals/bench_port.py, tests/translate/test_corpus_port.py)."""
    outcomes, tried = check(candidate), set()
    for _ in range(rounds):
        if all(o.metal == "ok" for o in outcomes):
            break
        notes = [n for o in outcomes for n in o.notes]
        fixed = mechanical_repair(candidate, case, diagnosis_ids(notes, []), tried)
        if fixed is None:
            break
        candidate, rid = fixed
        tried.add(rid)
        outcomes = check(candidate)
    return candidate, outcomes
