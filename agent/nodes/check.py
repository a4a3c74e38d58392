"""check: compile the candidate and run it against the oracle (the case's Python reference, or
the CUDA kernel in cuda_sim) at every size set and seed, under the simulator's sanitizers. A
candidate that fails is a record with its diagnostics, never an exception.
"""

from __future__ import annotations

import random

from agent.mac_timing import gate_size_sets
from agent.rewrites import fingerprint
from corpus.candidate import Candidate
from corpus.port_check import check_translation
from runners.errors import KportError

_MISMATCH = ("differ", "shape ", "missing", "NaN in the result")


def _kind(note: str) -> str:
    """compile | mismatch | sanitizer | oracle | other, for one outcome note."""
    if note.startswith("cuda:") or "no oracle" in note:
        return "oracle"
    if not note.startswith("metal:"):
        return "other"
    if "compile error" in note:
        return "compile"
    return "mismatch" if any(m in note for m in _MISMATCH) else "sanitizer"


def summarize(outcomes) -> dict:
    """A check record from evals Outcomes: ok (every run correct), runs, sanitizer counts,
    feedback (distinct failure messages, compile errors first) and oracle_broken."""
    runs = [{"sizes": o.sizes, "seed": o.seed, "cuda": o.cuda, "metal": o.metal,
             "max_err": o.max_err, "notes": list(o.notes)} for o in outcomes]
    kinds: dict[str, list[str]] = {}
    for r in runs:
        for note in r["notes"]:
            kinds.setdefault(_kind(note), [])
            if note not in kinds[_kind(note)]:
                kinds[_kind(note)].append(note)
    found = [r for r in runs if any(_kind(n) == "sanitizer" for n in r["notes"])]
    feedback = [n.removeprefix("metal: ") for k in ("compile", "sanitizer", "mismatch",
                                                    "other", "oracle")
                for n in kinds.get(k, [])][:8]
    return {"ok": bool(runs) and all(r["metal"] == "ok" for r in runs), "runs": runs,
            "sanitizer": {"runs": len(runs), "with_findings": len(found),
                          "findings": kinds.get("sanitizer", [])[:8]},
            "compiled": not kinds.get("compile"), "feedback": feedback,
            "oracle_broken": any("no oracle" in n for n in kinds.get("oracle", []))}


def run_check(case, candidate: Candidate, seeds: int | None) -> dict:
    """Check one candidate; a reply with no kernel or a launch MLX rejects is a failed record."""
    if candidate.error:
        return {"ok": False, "runs": [], "compiled": False, "feedback": [candidate.error],
                "sanitizer": {"runs": 0, "with_findings": 0, "findings": []},
                "oracle_broken": False}
    try:
        return summarize(check_translation(case, candidate, seeds))
    except (ValueError, KportError) as err:  # e.g. MLX's own launch checks (threadgroup size)
        return {"ok": False, "runs": [], "compiled": False, "feedback": [str(err)[:500]],
                "sanitizer": {"runs": 0, "with_findings": 0, "findings": []},
                "oracle_broken": False}


def held_out_check(case, candidate: Candidate, result: dict) -> dict:
    """``result`` (a correct check) with the candidate also run at sizes the case does not
    list: the stretched sizes and one held-out draw (agent.mac_timing.gate_size_sets; the draw
    seeded by case and candidate, so a run repeats). The optimiser's rewrites change how a
    launch splits the work, and a wrong split can pass at the listed sizes by luck (llama.cpp's
    ssm_conv with split_d_inner doubled did). Size sets where the oracle cannot run are left
    out; a failure at any other makes the record failed, its feedback naming the sizes."""
    rng = random.Random(f"{case.id}:{fingerprint(candidate)}")
    extra = [s for _, s in gate_size_sets(case, dict(case.sizes), rng)[1:]]
    if not extra:
        return result
    try:
        outcomes = check_translation(case, candidate, 1, extra)
    except (ValueError, KportError) as err:
        outcomes = []
        problem = [f"at held-out sizes {extra[0]}: {str(err)[:400]}"]
    else:
        judged = [o for o in outcomes if o.metal in ("ok", "FAIL")]
        problem = [f"at held-out sizes {o.sizes}: " + "; ".join(
            n.removeprefix("metal: ") for n in o.notes if n.startswith("metal:"))[:400]
            for o in judged if o.metal != "ok"]
        outcomes = judged
    extra_runs = summarize(outcomes)["runs"]
    for run in extra_runs:
        run["held_out"] = True
    if not problem:
        return {**result, "runs": result["runs"] + extra_runs}
    return {**result, "ok": False, "runs": result["runs"] + extra_runs,
            "feedback": (problem + result["feedback"])[:8]}


def check(state, runtime) -> dict:
    """Returns check (the record), iteration (+1) and one attempts entry. In the optimise
    phase a correct rewrite is also checked at held-out sizes (``held_out_check``)."""
    ctx = runtime.context
    cand = Candidate.model_validate(state["candidate"])
    result = run_check(ctx.case, cand, ctx.seeds)
    if result["ok"] and state.get("phase") == "optimise":
        result = held_out_check(ctx.case, cand, result)
    iteration = state.get("iteration", 0) + 1
    failed = [f"{r['sizes']} seed {r['seed']}" for r in result["runs"] if r["metal"] != "ok"]
    attempt = {"iteration": iteration, "phase": state.get("phase", "port"),
               "origin": cand.origin or "?", "ok": result["ok"],
               "summary": ("correct at every size set and seed" if result["ok"] else
                           f"failed {len(failed)} of {len(result['runs'])} runs"
                           if result["runs"] else "not run"),
               "feedback": result["feedback"][:4], "candidate": cand.model_dump()}
    return {"check": result, "iteration": iteration, "attempts": [attempt]}
