"""report.json and report.md of a port: the verdict, constructs and rules used, TODOs, the
rules that apply at each line of the kernel, the closest expert analogues with the lines of
theirs that do the same work, fix rules (matched and retrieved), validation per size set and
seed, sanitizer results, performance (lints and simulator metrics, or Mac timings), attempts,
the optimisation tree, LLM usage (model and tokens, never keys) and what was guessed.
Everything written passes through agent.llm.redact.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.llm import public_url, redact
from agent.rewrites import fingerprint
from corpus.candidate import Candidate
from corpus.check import compiled_by
from runners.sandbox import isolation

EXCERPT_LINES = 12
MAX_CORRESPONDENCES = 6


def shipped(state: dict) -> Candidate | None:
    """The candidate the package ships: the best correct one, else the last one with a body
    (not a failed record); None when there is none."""
    if state.get("best"):
        return Candidate.model_validate(state["best"]["candidate"])
    for attempt in reversed(state.get("attempts", [])):
        cand = Candidate.model_validate(attempt["candidate"])
        if not cand.error:
            return cand
    return None


def shipped_node(state: dict) -> int | None:
    """The id of the optimisation tree's node the package ships (None without a tree)."""
    ship = shipped(state)
    key = fingerprint(ship) if ship is not None else None
    return next((n["id"] for n in state.get("tree", []) if n.get("fingerprint") == key), None)


def build_report(state: dict, *, source: str, case, mode: str, llm_name: str | None,
                 base_url: str | None, thread_id: str, chip: str, budget, guessed: list[str],
                 package: dict, extra_notes: list[str] = ()) -> dict:
    """The report.json dict of a finished (or stopped) run."""
    best = state.get("best")
    chk = best["check"] if best else state.get("check", {})
    tr = state.get("translation", {})
    ship = shipped(state)
    attempts = [{k: a[k] for k in ("iteration", "phase", "origin", "ok", "summary", "feedback")}
                | Candidate.model_validate(a["candidate"]).model_dump(
                    include={"body", "header", "error"})
                for a in state.get("attempts", [])]
    return {
        "kernel": state.get("kernel"), "source": source, "case": case.id,
        "case_guessed": bool(guessed), "mode": mode, "accepted": bool(best),
        "status": "accepted" if best else "not accepted",
        "stop_reason": state.get("stop_reason", ""), "thread_id": thread_id,
        "shipped": ship.origin if ship else None,
        "constructs": {"coverage": tr.get("coverage"), "mapped": tr.get("mapped", {}),
                       "unmapped": tr.get("unmapped", {}), "todos": tr.get("todos", []),
                       "translator_notes": tr.get("notes", [])},
        "rules_used": tr.get("rules_used", []),
        "rules_matched": [{"rule_id": r["rule_id"], "title": r["title"],
                           "where": r.get("where", [])} for r in state.get("rules", [])],
        "rules_by_line": state.get("rule_lines", []),
        "analogues": [_analogue(a) for a in state.get("analogues", [])],
        "kb": state.get("kb_note", ""),
        "validation": {"oracle": ("CUDA kernel in cuda_sim" if case.check.reference == "cuda"
                                  else f"Python reference {case.check.reference}"),
                       "rtol": case.check.rtol, "atol": case.check.atol,
                       "runs": chk.get("runs", []), "feedback": chk.get("feedback", [])},
        "sanitizer": chk.get("sanitizer", {}),
        "performance": (best or {}).get("bench") or {"note": "no correct port to measure"},
        "attempts": attempts,
        "optimisation": {"note": state.get("opt_note", ""), "tree": state.get("tree", []),
                         "shipped_node": shipped_node(state),
                         "scores": ((best or {}).get("bench") or {}).get("note", "")},
        "fix_rules": state.get("fixes", []),
        "llm": {"mode": mode, "model": llm_name, "base_url": public_url(base_url),
                "calls": state.get("llm_calls", 0),
                "input_tokens": state.get("input_tokens", 0),
                "output_tokens": state.get("output_tokens", 0),
                "total_tokens": state.get("input_tokens", 0) + state.get("output_tokens", 0),
                "tokens_estimated": state.get("tokens_estimated", False)},
        "budget": {"iterations": budget.iterations, "tokens": budget.tokens,
                   "wall_s": budget.wall_s, "optimise": budget.optimise,
                   "candidates_checked": state.get("iteration", 0)},
        "chip": chip, "guessed": guessed, "notes": list(extra_notes),
        "package": package, "isolation": _isolation(), "compiler": _compiler(),
    }


def _analogue(a: dict) -> dict:
    """An analogue as the report gives it: where both sides come from, the lines of each that
    do the work of the kernel's lines, and the opening of its Metal port."""
    return {"title": a["title"], "case": a.get("case"), "score": a["score"],
            "metal_title": a.get("metal_title"), "cuda_source": a.get("cuda_source"),
            "metal_source": a.get("metal_source"), "corresponds": a.get("corresponds", []),
            "metal_excerpt": a.get("metal", "").strip().splitlines()[:EXCERPT_LINES]}


def _kb_markdown(rep: dict) -> list[str]:
    """The knowledge-base part of report.md: the note, the rules at each line of the kernel,
    the analogues with their corresponding lines, the fix rules."""
    out = ["", "## Knowledge base", "", rep["kb"]]
    if rep.get("rules_by_line"):
        out += ["", "### Rules at each line of the kernel", "", "| line | code | rule -> Metal |",
                "|---|---|---|"]
        out += [f"| {r['at']} | `{_cell(r['code'], 70)}` | "
                + "<br>".join(f"{x['rule_id']} -> `{_cell(x['metal'], 60)}`" for x in r["rules"])
                + " |" for r in rep["rules_by_line"]]
    for i, a in enumerate(rep["analogues"], 1):
        out += ["", f"### Analogue {i}: {a['title']}", "",
                f"CUDA `{a.get('cuda_source') or '-'}`, ported to Metal as "
                f"`{a.get('metal_source') or '-'}` (fused rank score {a['score']:.4f})."]
        rows = a.get("corresponds", [])
        if rows:
            out += ["", "How it does what your kernel does:", "",
                    "| your lines | construct | analogue CUDA | analogue Metal |",
                    "|---|---|---|---|"]
            for c in rows[:MAX_CORRESPONDENCES]:
                yours = ", ".join(c.get("yours") or map(str, c["lines"]))
                sides = ["<br>".join(f"{x['at']}: `{_cell(x['code'], 60)}`" for x in
                                     c.get(side, [])[:4]) or "-" for side in ("cuda", "metal")]
                rules = ", ".join(c.get("rule_ids") or [c["rule_id"]])
                out.append(f"| {_cell(yours, 40)} | {rules} | {sides[0]} | {sides[1]} |")
        else:
            out += ["", "Its Metal port opens with:", "", "```metal", *a["metal_excerpt"], "```"]
    if rep.get("fix_rules"):
        out += ["", "### Fix rules for the failure", ""]
        out += [f"- {f['id']} ({_via(f)}): {f['title']} — {_cell(f['fix'], 300)}"
                for f in rep["fix_rules"]]
    return out


def _via(f: dict) -> str:
    if f.get("via") == "retrieval":
        return f"retrieved, score {f.get('score') or 0:.2f}"
    return "pattern match"


def _cell(text: str, width: int) -> str:
    """``text`` on one line for a Markdown table cell, cut to ``width``."""
    flat = " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _compiler() -> str:
    return compiled_by()


def _isolation() -> str:
    return isolation().summary()


def _runs_table(runs: list[dict]) -> list[str]:
    lines = ["| sizes | seed | metal | cuda | max err | notes |", "|---|---|---|---|---|---|"]
    for r in runs:
        note = "; ".join(r["notes"])[:160].replace("|", "\\|")
        lines.append(f"| {r['sizes']} | {r['seed']} | {r['metal']} | {r['cuda']} | "
                     f"{r['max_err']:.3g} | {note} |")
    return lines


def report_markdown(rep: dict) -> str:
    """report.md: the same facts as report.json, for people."""
    val, perf, llm = rep["validation"], rep["performance"], rep["llm"]
    out = [f"# kport port: `{rep['kernel']}`", "",
           f"**{rep['status'].upper()}** — {rep['stop_reason']}", "",
           f"- source: `{rep['source']}`; case: `{rep['case']}`"
           + (" (guessed: see below)" if rep["case_guessed"] else ""),
           f"- mode: {rep['mode']}; chip for lints: {rep['chip']}; thread: `{rep['thread_id']}`",
           f"- shipped candidate: {rep['shipped']}",
           f"- candidates ran in: {rep.get('isolation', 'not recorded')}",
           f"- compiled by: {rep.get('compiler', 'not recorded')}", "",
           "## Validation", "",
           f"Oracle: {val['oracle']}; tolerances rtol={val['rtol']} atol={val['atol']}.", ""]
    out += _runs_table(val["runs"]) if val["runs"] else ["No run completed."]
    san = rep["sanitizer"]
    out += ["", f"Sanitizers (bounds, races, uninitialised reads): {san.get('runs', 0)} runs, "
            f"{san.get('with_findings', 0)} with findings."]
    out += [f"- {f}" for f in san.get("findings", [])]
    out += ["", "## Performance", "", perf.get("note", "")]
    if perf.get("timing"):
        out.append(f"- timing: {perf['timing']}")
    if perf.get("metrics"):
        out.append(f"- simulator metrics: {perf['metrics']}")
    out += [f"- lint {x['severity']}: [{x['id']}] {x['message']}" for x in perf.get("lints", [])]
    c = rep["constructs"]
    cov = c["coverage"]
    out += ["", "## Constructs and rules", "",
            f"Translator coverage: {cov:.0%}" if isinstance(cov, float) else "",
            f"- mapped: {c['mapped']}", f"- rules used: {', '.join(rep['rules_used'])}"]
    out += [f"- TODO {t.get('file') or 'line'}:{t['line']}: {t['construct']} ({t['rule']}) "
            f"-> {t['metal']}" for t in c["todos"]]
    out += _kb_markdown(rep)
    out += ["", "## Attempts", ""]
    out += [f"{a['iteration']}. {a['origin']} ({a['phase']}): {a['summary']}"
            + (f" — {a['feedback'][0][:160]}" if a["feedback"] else "")
            for a in rep["attempts"]]
    out += ["", "## Optimisation", ""] + tree_markdown(rep["optimisation"])
    out += ["", "## LLM", "", f"mode {llm['mode']}; model {llm['model'] or '-'}; "
            f"{llm['calls']} calls, {llm['total_tokens']} tokens"
            + (" (estimated)" if llm["tokens_estimated"] else "")]
    if rep["guessed"]:
        out += ["", "## Guessed (check these)", ""] + [f"- {g}" for g in rep["guessed"]]
    if rep["notes"]:
        out += ["", "## Notes", ""] + [f"- {n}" for n in rep["notes"]]
    out += ["", "## Files", ""] + [f"- {f}" for f in rep["package"].get("files", [])]
    return "\n".join(out) + "\n"


def _tree_line(n: dict, shipped_id, root_s) -> str:
    what = f"{n['action']} ({n['title']})" if n.get("title") else (n.get("action") or "root")
    if n.get("predicted_s") is not None:
        detail = f"predicted {n['predicted_s'] * 1e6:.4g} µs, {n['bottleneck']}-bound"
        if root_s and n.get("parent") is not None:
            detail += f", {n['predicted_s'] / root_s - 1:+.1%} vs the root"
    elif n.get("score"):
        detail = f"score {n['score']['kind']} {n['score']['value']:g}"
    else:
        detail = _cell("; ".join(n.get("notes", [])), 160)
    mark = " **<- shipped**" if n["id"] == shipped_id else ""
    return f"node {n['id']} {what}: {n['status']}; {detail}{mark}"


def tree_markdown(opt: dict) -> list[str]:
    """The optimisation tree as nested Markdown bullets: each node's rewrite, verdict,
    predicted time and bottleneck (or score, or why it was rejected), the shipped one marked."""
    out = [opt["note"] or "-"]
    tree = opt.get("tree", [])
    if not tree:
        return out
    if opt.get("scores"):
        out += ["", opt["scores"]]
    root_s = tree[0].get("predicted_s")
    children: dict = {}
    for n in tree:
        children.setdefault(n.get("parent"), []).append(n)
    out.append("")
    stack = [(n, 0) for n in reversed(children.get(None, []))]
    while stack:
        n, depth = stack.pop()
        out.append("  " * depth + "- " + _tree_line(n, opt.get("shipped_node"), root_s))
        stack += [(c, depth + 1) for c in reversed(children.get(n["id"], []))]
    return out


def write_report(folder: Path, rep: dict) -> None:
    """Write report.json and report.md into ``folder``, redacted."""
    (folder / "report.json").write_text(redact(json.dumps(rep, indent=1, default=str)) + "\n")
    (folder / "report.md").write_text(redact(report_markdown(rep)))
