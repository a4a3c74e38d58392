"""retrieve: what the knowledge base says about this kernel. The concept rules whose CUDA
constructs occur in it (exact), ported analogues from the KB (never the case's own expert pair:
leave-one-out), the Apple-GPU facts and lints that bear on the translator's draft. Fix rules
are matched later, against real diagnostics. A missing KB is not an error: the agent goes on
without analogues and the report says so.
"""

from __future__ import annotations

from agent.nodes.bench import perf_lints
from corpus.candidate import Candidate
from kb.arch import features
from kb.ingest import case_chunks
from kb.parse import functions, kernel_closure
from kb.rules_match import kernel_tokens, match_rules
from kb.search import search_home
from runners.errors import KportError
from runners.settings import load_settings

ANALOGUES = 2
ANALOGUE_CHARS = 2500
BASE_FACTS = ("F1", "F2", "F3", "F9")  # SIMD width, threadgroup limits, SIMD reductions


def own_pair_ids(case) -> set[str]:
    """Ids of the case's own CUDA/Metal pair in the KB (what leave-one-out excludes)."""
    try:
        return {c.id for c in case_chunks(case)}
    except (OSError, ValueError):
        return set()


def analogues(ctx, query: str) -> tuple[list[dict], str]:
    """Up to ANALOGUES ported CUDA/Metal pairs like ``query``, excluding the case's own;
    returns (pairs, note) where the note says what was (not) retrieved and why."""
    if not ctx.use_kb:
        return [], "knowledge base not used (--no-kb): no analogues"

    settings = load_settings()
    try:
        hits = search_home(settings, query, kinds=["analogues"], k=3 * ANALOGUES + 2,
                           exclude=own_pair_ids(ctx.case))
    except KportError as err:
        return [], f"no retrieval: {err}"
    pairs, seen = [], set()
    for h in hits:
        if h.metadata.get("case") == ctx.case.id or h.pair is None:
            continue  # leave-one-out, and only known ports are analogues
        if h.pair.get("metadata", {}).get("case") == ctx.case.id:
            continue
        key = frozenset((h.id, h.pair["id"]))
        if key in seen:
            continue
        seen.add(key)
        cuda, metal = ((h.text, h.pair["text"]) if h.metadata.get("pair_role") == "cuda"
                       else (h.pair["text"], h.text))
        pairs.append({"id": h.id, "title": h.title, "case": h.metadata.get("case"),
                      "score": round(h.score, 6), "cuda": cuda[:ANALOGUE_CHARS],
                      "metal": metal[:ANALOGUE_CHARS]})
        if len(pairs) == ANALOGUES:
            break
    where = settings.chroma_url or str(settings.kb_dir)
    return pairs, f"{len(pairs)} analogue pair(s) from the KB at {where} (own pair excluded)"


def arch_facts(ids) -> list[dict]:
    """The Apple-GPU facts (kb/rules/arch/features.toml) with these ids, in id order."""
    want = set(ids)
    return [{"id": f.id, "fact": f.fact, "applies": f.applies}
            for f in features() if f.id in want]


def retrieve(state, runtime) -> dict:
    """Returns rules (exact matches), analogues, kb_note, lints of the translator's draft and
    the arch facts behind them."""
    ctx = runtime.context
    rules = rule_records(ctx.src, ctx.kernel, ctx.where)
    tr = state["translation"]
    pairs, note = analogues(ctx, kernel_text(ctx.src, ctx.kernel))
    draft = Candidate.from_translation(tr)
    lints = perf_lints(draft, dict(ctx.case.sizes), ctx.chip) if draft.grid else []
    facts = arch_facts({*BASE_FACTS, *(s for x in lints for s in x["sources"])})
    return {"rules": rules, "analogues": pairs, "kb_note": note, "lints": lints, "arch": facts}


def rule_records(src: str, kernel: str, where: str) -> list[dict]:
    """The concept rules that occur in ``kernel`` (and its callees), as state records."""
    return [{"rule_id": h.rule_id, "title": h.title, "metal": h.metal, "lines": h.lines,
             "pitfalls": h.pitfalls[:2], "unconfirmed": h.unconfirmed}
            for h in match_rules(kernel_tokens(src, kernel, where))]


def kernel_text(src: str, kernel: str) -> str:
    """The kernel and its callees (the file may hold other kernels); the whole source when
    the kernel is not found."""
    funcs = functions(src, "cuda")
    found = next((f for f in funcs if f.name == kernel.split("<")[0]), None)
    if found is None:
        return src
    table = {f.name: f for f in funcs if f.kind != "kernel"}
    return "\n\n".join(f.text for f in kernel_closure(found, table))
