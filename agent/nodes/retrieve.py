"""retrieve: what the knowledge base says about this kernel. The concept rules whose CUDA
constructs occur in it (exact), with the file and line of each occurrence; ported analogues from
the KB (never the case's own expert pair: leave-one-out), each with the lines of its CUDA and
Metal sides that do what the kernel's lines do (kb/alignment.py); the Apple-GPU facts and lints
that bear on the translator's draft. Fix rules are matched later, against real diagnostics.
A missing KB is built on first use (kb/ready.py); one that cannot be built is not an error:
the agent goes on without analogues and the report says so.
"""

from __future__ import annotations

from agent.nodes.bench import perf_lints
from corpus.candidate import Candidate
from kb.answers import analogue_correspondence
from kb.arch import features
from kb.ingest import case_chunks
from kb.parse import functions, kernel_closure
from kb.ready import ready_store
from kb.rules_match import kernel_tokens, match_rules
from kb.search import search
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


def analogues(ctx, query: str, query_rules=None) -> tuple[list[dict], str]:
    """Up to ANALOGUES ported CUDA/Metal pairs like ``query``, excluding the case's own;
    returns (pairs, note) where the note says what was (not) retrieved and why. Each pair says
    where it comes from and, through ``query_rules`` (the kernel's kb.rules_match hits; read
    from ``query`` when None), which of its lines do the work of the kernel's lines."""
    if not ctx.use_kb:
        return [], "knowledge base not used (--no-kb): no analogues"

    settings = load_settings()
    try:
        store, built = ready_store(settings)
        hits = search(store, query, kinds=["analogues"], k=3 * ANALOGUES + 2,
                      exclude=own_pair_ids(ctx.case), cache_root=settings.home / "cache")
    except KportError as err:
        return [], f"no retrieval: {err}; porting goes on without the knowledge base"
    if query_rules is None:
        query_rules = match_rules(kernel_tokens(query))
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
        cuda_side = h.metadata.get("pair_role") == "cuda"
        cuda, metal = (h.text, h.pair["text"]) if cuda_side else (h.pair["text"], h.text)
        cm, mm = ((h.metadata, h.pair["metadata"]) if cuda_side
                  else (h.pair["metadata"], h.metadata))
        pairs.append({"id": h.id, "title": h.title, "case": h.metadata.get("case"),
                      "score": round(h.score, 6), "cuda": cuda[:ANALOGUE_CHARS],
                      "metal": metal[:ANALOGUE_CHARS],
                      "cuda_source": _source(cm), "metal_source": _source(mm),
                      "metal_title": h.pair["title"] if cuda_side else h.title,
                      "corresponds": analogue_correspondence(h, query_rules)})
        if len(pairs) == ANALOGUES:
            break
    where = settings.chroma_url or str(settings.kb_dir)
    note = f"{len(pairs)} analogue pair(s) from the KB at {where} (own pair excluded)"
    return pairs, f"{built}; {note}" if built else note


def _source(meta: dict) -> str:
    """Where a chunk comes from: its path (and source name when that says more)."""
    path, src = str(meta.get("path") or ""), str(meta.get("source") or "")
    return f"{path} ({src})" if path and src and src not in path else path or src


def arch_facts(ids) -> list[dict]:
    """The Apple-GPU facts (kb/rules/arch/features.toml) with these ids, in id order."""
    want = set(ids)
    return [{"id": f.id, "fact": f.fact, "applies": f.applies}
            for f in features() if f.id in want]


def retrieve(state, runtime) -> dict:
    """Returns rules (exact matches, with file and line), rule_lines (the rules at each line),
    analogues (with corresponding lines), kb_note, lints of the translator's draft and the
    arch facts behind them."""
    ctx = runtime.context
    hits = match_rules(kernel_tokens(ctx.src, ctx.kernel, ctx.where))
    rules = [_rule_record(h, ctx.origin, ctx.where) for h in hits]
    tr = state["translation"]
    pairs, note = analogues(ctx, kernel_text(ctx.src, ctx.kernel), hits)
    for p in pairs:
        for c in p["corresponds"]:
            c["yours"] = [_at(n, ctx.origin, ctx.where) for n in c["lines"]]
    draft = Candidate.from_translation(tr)
    lints = perf_lints(draft, dict(ctx.case.sizes), ctx.chip) if draft.grid else []
    facts = arch_facts({*BASE_FACTS, *(s for x in lints for s in x["sources"])})
    return {"rules": rules, "rule_lines": rule_lines(rules, ctx.src, ctx.origin, ctx.where),
            "analogues": pairs, "kb_note": note, "lints": lints, "arch": facts}


def _at(line: int, origin, where: str) -> str:
    """``FILE:LINE`` of line ``line`` of the kernel's source text."""
    if origin and 1 <= line <= len(origin):
        return f"{origin[line - 1][0]}:{origin[line - 1][1]}"
    return f"{where}:{line}"


def _rule_record(h, origin=None, where: str = "<source>") -> dict:
    return {"rule_id": h.rule_id, "title": h.title, "metal": h.metal, "lines": h.lines,
            "where": [_at(n, origin, where) for n in h.lines],
            "pitfalls": h.pitfalls[:2], "unconfirmed": h.unconfirmed}


def rule_records(src: str, kernel: str, where: str, origin=None) -> list[dict]:
    """The concept rules that occur in ``kernel`` (and its callees), as state records: lines
    of ``src`` and, in ``where``, FILE:LINE (through ``origin`` when ``src`` was read from
    several files)."""
    return [_rule_record(h, origin, where)
            for h in match_rules(kernel_tokens(src, kernel, where))]


def rule_lines(rules: list[dict], src: str, origin=None, where: str = "<source>") -> list[dict]:
    """The kernel's lines that concept rules apply to, in order: FILE:LINE, the code, and the
    rules (id and Metal form) at that line."""
    rows = src.splitlines()
    at: dict[int, list[dict]] = {}
    for r in rules:
        for n in r["lines"]:
            at.setdefault(n, []).append({"rule_id": r["rule_id"], "metal": r["metal"]})
    return [{"at": _at(n, origin, where),
             "code": rows[n - 1].strip()[:160] if 1 <= n <= len(rows) else "",
             "rules": at[n]} for n in sorted(at)]


def kernel_text(src: str, kernel: str) -> str:
    """The kernel and its callees (the file may hold other kernels); the whole source when
    the kernel is not found."""
    funcs = functions(src, "cuda")
    found = next((f for f in funcs if f.name == kernel.split("<")[0]), None)
    if found is None:
        return src
    table = {f.name: f for f in funcs if f.kind != "kernel"}
    return "\n\n".join(f.text for f in kernel_closure(found, table))
