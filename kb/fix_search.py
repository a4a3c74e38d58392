"""Fix rules for a failure, from both sides: the patterns of kb/rules/fixes (exact, a fixed
table) and retrieval over the KB's ``kport_fixes`` collection with the diagnostics as the query
(hybrid search: it also finds the rule for a wording no pattern foresaw, e.g. Apple's compiler
saying what metal_sim says differently).

Pattern matches come first, in the order of the messages and the rules' priorities; retrieved
rules follow when their calibrated score (kb/calibration.py) reaches ``MIN_CONFIDENCE``, best
first, without repeats.
"""

from __future__ import annotations

from kb.calibration import confidence
from kb.fixes import FixRule, load_fixes, match_fixes
from kb.search import search

MIN_CONFIDENCE = 0.3
QUERY_MESSAGES = 4  # diagnostics joined into one query
QUERY_CHARS = 1200


def diagnostics_query(messages: list[str]) -> str:
    """One search query from the first few diagnostics (file names and positions dropped)."""
    kept = []
    for m in messages[:QUERY_MESSAGES]:
        head, sep, rest = m.partition(": ")
        kept.append(rest if sep and (":" in head or head.endswith((".metal", ".cu"))) else m)
    return "\n".join(kept)[:QUERY_CHARS]


def retrieve_fixes(store, messages: list[str], cache_root, k: int = 4) -> list[tuple[str, float]]:
    """(fix id, calibrated score) of the fixes collection's best hits for ``messages``, those
    at or over MIN_CONFIDENCE; KBError when the store cannot be searched."""
    query = diagnostics_query(messages)
    if not query.strip():
        return []
    hits = search(store, query, kinds=["fixes"], k=k, cache_root=cache_root)
    out = []
    for rank, h in enumerate(hits, 1):
        score = confidence(h.ranks, rank, is_code=False)
        if h.metadata.get("fix_id") and score >= MIN_CONFIDENCE:
            out.append((str(h.metadata["fix_id"]), round(score, 3)))
    return out


def fix_record(rule: FixRule, via: str, score: float | None = None) -> dict:
    """A fix rule as the agent's state, the report and ``kport kb fixes --json`` carry it."""
    return {"id": rule.id, "title": rule.title, "fix": rule.fix, "origin": rule.origin,
            "unconfirmed": rule.unconfirmed, "via": via, "score": score}


def merged_fixes(messages: list[str], retrieved: list[tuple[str, float]],
                 limit: int | None = None, extra_ids: list[str] = ()) -> list[dict]:
    """Pattern matches of ``messages`` (and ``extra_ids``, e.g. lint ids that name a fix
    rule), then ``retrieved`` ones not already there; each record says ``via`` which."""
    by_id = {r.id: r for r in load_fixes()}
    out: dict[str, dict] = {}
    for m in messages:
        for r in match_fixes(m):
            out.setdefault(r.id, fix_record(r, "pattern"))
    for i in extra_ids:
        if i in by_id:
            out.setdefault(i, fix_record(by_id[i], "pattern"))
    for i, score in retrieved:
        if i in by_id and i not in out:
            out[i] = fix_record(by_id[i], "retrieval", score)
    return list(out.values())[:limit]
