"""decide: what to do with the candidate just checked. Porting: a correct one is accepted (and,
with optimisation budget, becomes the root of the optimisation tree); an incorrect one is repaired
(LLM: diagnostics and fix rules, matched by pattern and retrieved from the KB, fed back;
offline: a mechanical fix from agent.repairs, if one applies) or the run stops, saying why.
Optimising: the candidate joins the tree as scored or rejected, and the search goes on while
the budgets and untried actions last.
"""

from __future__ import annotations

from agent.nodes.bench import perf_lints
from agent.nodes.optimise import applicable, clearly_better, next_expansion, next_rewrite
from agent.repairs import diagnosis_ids, mechanical_repair, repair_id
from agent.rewrites import fingerprint
from agent.state import budget_stop
from corpus.candidate import Candidate
from kb.fix_search import merged_fixes, retrieve_fixes
from kb.store import KBStore
from runners.errors import KportError
from runners.settings import load_settings

ACCEPTED = "accepted: correct at every size set and seed"
MAX_FIXES = 4


def fix_rules(ctx, feedback: list[str], ids: list[str]) -> list[dict]:
    """The fix rules for a failure: those the diagnoses ``ids`` name (pattern matches and
    lints), then those retrieval over the KB's fix rules finds for ``feedback`` (kb/fix_search);
    each says ``via`` which. Without a KB (or with --no-kb) the patterns alone."""
    retrieved = []
    if ctx.use_kb:
        settings = load_settings()
        try:
            if settings.chroma_url or (settings.kb_dir / "chroma.sqlite3").is_file():
                retrieved = retrieve_fixes(KBStore.from_settings(settings), feedback,
                                           settings.home / "cache")
        except KportError:
            retrieved = []  # the retrieve node already said why the KB is not there
    return merged_fixes([], retrieved, limit=MAX_FIXES, extra_ids=ids)


def _record(cand: Candidate, bench: dict, check: dict) -> dict:
    """The state record of a correct candidate (``best``)."""
    return {"candidate": cand.model_dump(), "score": bench.get("score"), "check": check,
            "bench": bench}


def search_stop(state, ctx) -> str:
    """Why the optimisation search must stop now ('' when it may go on). Mechanical rewrites
    (offline) cost no tokens: only --optimise and the wall time bound them; LLM rewrites count
    against every budget."""
    if ctx.llm is None:
        return f"wall-time budget spent ({ctx.budget.wall_s:g} s)" if ctx.out_of_time() else ""
    return budget_stop(state, ctx)


def _tree_node(node_id: int, parent, action, title, cand: Candidate, status: str,
               bench: dict | None) -> dict:
    """One node of the optimisation tree as the report draws it."""
    node = {"id": node_id, "parent": parent, "action": action, "title": title,
            "origin": cand.origin, "status": status, "fingerprint": fingerprint(cand)}
    if bench is not None:
        model = bench.get("model") or {}
        node.update(score=bench.get("score"), predicted_s=model.get("predicted_s"),
                    bottleneck=model.get("bottleneck"))
    return node


def _has_action(state, ctx, frontier: list[dict], tree: list[dict]) -> bool:
    if ctx.llm is None:
        return next_rewrite(frontier, tree, ctx.case) is not None
    return next_expansion(frontier, state.get("features", {})) is not None


def _start_search(state, ctx, best: dict) -> dict:
    """Accept ``best``; with budget and an applicable action, root the search on it."""
    out = {"best": best, "decision": "accept"}
    if ctx.budget.optimise <= 0:
        return {**out, "opt_note": "optimisation off (budget 0)"}
    lints = best["bench"].get("lints", [])
    cand = Candidate.model_validate(best["candidate"])
    root = _tree_node(0, None, None, None, cand, "root", best["bench"])
    frontier = [{"id": 0, "score": best["score"], "candidate": best["candidate"],
                 "lints": lints, "tried": []}]
    stop = search_stop(state, ctx)
    if not stop and ctx.llm is not None and not applicable(state.get("features", {}), lints):
        stop = "no applicable action"
    if not stop and not _has_action(state, ctx, frontier, [root]):
        stop = "no rewrite applies" if ctx.llm is None else "no applicable action"
    if stop:
        return {**out, "opt_note": f"optimisation skipped: {stop}", "tree": [root]}
    return {**out, "decision": "optimise", "phase": "optimise", "tree": [root],
            "frontier": frontier}


def _port_phase(state, ctx) -> dict:
    chk, cand = state["check"], Candidate.model_validate(state["candidate"])
    if chk["ok"]:
        return _start_search(state, ctx, _record(cand, state.get("bench", {}), chk))
    fb = chk["feedback"]
    if chk.get("oracle_broken"):
        cause = next((f for f in fb if f.startswith("cuda:")), "")
        cause = cause.removeprefix("cuda:").split("; metal:")[0].strip()
        return {"decision": "stop", "feedback": fb, "stop_reason":
                "the oracle failed: the CUDA kernel did not run cleanly in cuda_sim at these "
                f"sizes ({cause[:300] or 'see the validation notes'}); correct the case "
                "(shapes, sizes, values, --shared-mem) and run again"}
    lints = [] if cand.error else perf_lints(cand, dict(ctx.case.sizes), ctx.chip)
    ids = diagnosis_ids(fb, lints)
    update = {"feedback": fb, "fixes": fix_rules(ctx, fb, ids)}
    stop = budget_stop(state, ctx)
    if stop:
        return {**update, "decision": "stop", "stop_reason": stop}
    if ctx.llm is not None:
        return {**update, "decision": "repair"}
    tried = {repair_id(a["origin"]) for a in state.get("attempts", [])} - {None}
    fixed = mechanical_repair(cand, ctx.case, ids, tried)
    if fixed is not None:
        return {**update, "decision": "repair", "pending": fixed[0].model_dump()}
    todos = len(state["translation"].get("todos", []))
    reason = f"offline: no mechanical repair for: {fb[0] if fb else 'the failure'}"
    if ids:
        reason += f" (fix rules: {', '.join(ids[:3])}; see the report)"
    if todos:
        reason += (f"; {todos} KPORT-TODO construct(s) remain for an LLM (set KPORT_MODEL) "
                   "or a person")
    return {**update, "decision": "stop", "stop_reason": reason}


def _optimise_phase(state, ctx) -> dict:
    chk, exp = state["check"], state.get("expanding", {})
    cand = Candidate.model_validate(state["candidate"])
    tree, frontier, best = list(state["tree"]), list(state["frontier"]), state["best"]
    bench = state.get("bench", {}) if chk["ok"] else None
    node = _tree_node(len(tree), exp.get("parent"), exp.get("action"), exp.get("title"), cand,
                      "scored" if chk["ok"] else "rejected", bench)
    update: dict = {}
    if chk["ok"]:
        frontier.append({"id": node["id"], "score": bench["score"],
                         "candidate": cand.model_dump(),
                         "lints": bench.get("lints", []), "tried": []})
        if clearly_better(bench["score"], best["score"]):
            node["status"] = "scored, new best"
            update["best"] = _record(cand, bench, chk)
    else:
        node["notes"] = chk["feedback"][:2]
    tree.append(node)
    tried = len(tree) - 1
    stop = search_stop(state, ctx)
    if not stop and tried >= ctx.budget.optimise:
        stop = f"optimisation budget spent ({ctx.budget.optimise} candidates)"
    if not stop and not _has_action(state, ctx, frontier, tree):
        stop = "every applicable action was tried"
    update.update(tree=tree, frontier=frontier)
    if stop:
        return {**update, "decision": "accept", "opt_note": f"optimisation stopped: {stop}"}
    return {**update, "decision": "optimise"}


def decide(state, runtime) -> dict:
    """Returns ``decision`` (accept | repair | optimise | stop) and what goes with it."""
    ctx = runtime.context
    if state.get("phase") == "optimise":
        return _optimise_phase(state, ctx)
    return _port_phase(state, ctx)


def after_decide(state) -> str:
    """Route: 'draft' to repair, 'optimise', or 'finish'."""
    return {"repair": "draft", "optimise": "optimise"}.get(state.get("decision", ""), "finish")


def finish(state, runtime) -> dict:
    """The verdict: accepted when a correct candidate exists; the stop reason says why not."""
    if state.get("best") is not None:
        note = state.get("opt_note", "")
        if state.get("stop_reason"):  # a budget or the provider stopped the search
            note = f"optimisation stopped: {state['stop_reason']}"
        return {"decision": "accept", "stop_reason": ACCEPTED, "opt_note": note}
    return {"decision": "reject",
            "stop_reason": state.get("stop_reason") or "no correct candidate"}
