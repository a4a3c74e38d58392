"""Commands that read the knowledge: /rules (the concept rules, exact), /analogues and /search
(the knowledge base, hybrid retrieval, built on first use; docs/kb.md)."""

from __future__ import annotations

from types import SimpleNamespace

from agent.chat.state import load_case_of, need_kernel, split_args
from agent.nodes.retrieve import analogues, kernel_text
from kb.concepts import load_rules
from kb.ready import ready_store
from kb.search import search
from kb.store import COLLECTIONS
from runners.errors import KportError


def cmd_rules(state, args, ctx, say) -> dict:
    """/rules [RULE_ID]: the concept rules that apply to the loaded kernel, or one rule."""
    pos, _ = split_args(args, "/rules [RULE_ID]", {})
    if pos:
        rule = next((r for r in load_rules() if r.id == pos[0]), None)
        if rule is None:
            near = [r.id for r in load_rules() if pos[0] in r.id][:6]
            raise KportError(f"no rule {pos[0]!r}" + (f"; similar: {', '.join(near)}"
                                                      if near else "; /rules lists them"))
        say(f"{rule.id} [{rule.group}] {rule.title}" + ("  (UNCONFIRMED)"
                                                         if rule.unconfirmed else ""))
        say(f"  CUDA:  {', '.join(rule.cuda)}")
        say(f"  Metal: {rule.metal}")
        if rule.notes:
            say(f"  notes: {rule.notes}")
        for p in rule.pitfalls:
            say(f"  pitfall: {p}")
        if rule.source:
            say(f"  source: {rule.source}")
        return {}
    need_kernel(state)
    rules = state.get("rules", [])
    say(f"{len(rules)} concept rule(s) apply to {state['kernel']}:")
    for r in rules:
        mark = " (UNCONFIRMED)" if r.get("unconfirmed") else ""
        lines = ",".join(map(str, r["lines"][:6]))
        say(f"  {r['rule_id']:<34} lines {lines:<12} -> {r['metal'][:90]}{mark}")
    say("  /rules RULE_ID shows one in full (pitfalls, source)")
    return {}


def cmd_analogues(state, args, ctx, say) -> dict:
    """/analogues: CUDA/Metal pairs already ported that are most like the loaded kernel (from
    the knowledge base; the kernel's own corpus pair is left out)."""
    split_args(args, "/analogues", {})
    case = load_case_of(state)
    pairs, note = analogues(SimpleNamespace(use_kb=True, case=case),
                            kernel_text(state["src"], state["kernel"]))
    say(note)
    for p in pairs:
        say(f"  {p['title']}  (case {p.get('case') or '-'}, score {p['score']:.4f}, "
            f"id {p['id']})")
        for line in p["metal"].strip().splitlines()[:6]:
            say(f"      {line}")
    if not pairs and "no retrieval" in note:
        say("  build the knowledge base first: `kport kb build` (see docs/kb.md)")
    return {"analogues": [{k: p[k] for k in ("id", "title", "case", "score")} for p in pairs]}


def cmd_search(state, args, ctx, say) -> dict:
    """/search QUERY [--kind KIND]: the knowledge base's best chunks for QUERY (rules, arch,
    analogues, docs, fixes), as `kport kb search` gives them."""
    usage = "/search QUERY [--kind rules|arch|analogues|docs|fixes]"
    pos, opts = split_args(args, usage, {"--kind": True})
    if not pos:
        raise KportError(f"usage: {usage}")
    kind = opts.get("--kind")
    if kind is not None and kind not in COLLECTIONS:
        raise KportError(f"--kind {kind}: one of {', '.join(COLLECTIONS)}")
    store, built = ready_store(ctx.settings)
    if built:
        say(built)
    hits = search(store, " ".join(pos), kinds=[kind] if kind else None, k=8,
                  cache_root=ctx.settings.home / "cache")
    if not hits:
        say("nothing found")
    for i, h in enumerate(hits, 1):
        label = h.metadata.get("rule_id") or h.id
        say(f"{i:2}. [{h.kind}] {label}: {h.title[:90]}  ({h.score:.4f})")
    return {}
