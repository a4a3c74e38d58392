"""Answers, not titles: what ``kport kb search`` and MCP's ``kb_search`` give for each hit.

For a concept rule: its text (notes, pitfalls), the CUDA and Metal spellings, a short example
pair (the lines of the rule's runnable example that hold the construct) and the source; for a
fix rule the error and the fix; for an architecture fact the fact; for an analogue the kernel,
where it comes from and its pair. Every hit has its rank and a calibrated score (kb/calibration.py).
A query read from a CUDA file also says which lines of the file each hit concerns
(kb/alignment.py).
"""

from __future__ import annotations

import re

from kb.alignment import (
    analogue_sides,
    correspondence,
    cuda_tokens,
    excerpt,
    file_line,
    hit_lines,
    kernel_offset,
    metal_lines,
    metal_markers,
    rule,
)
from kb.calibration import hit_confidence
from kb.chunks import without_asked
from kb.fixes import load_fixes
from kb.rules_match import match_rules
from kb.search import Hit, query_view

EXAMPLE_LINES = 3
EXCERPT_LINES = 6
_BOILERPLATE = re.compile(r"^\s*(extern \"C\"|__global__|[{}]\s*$|uint i = thread_position|"
                          r"int i = (blockIdx|threadIdx))")


def _example_lines(text: str, lines: list[int]) -> list[str]:
    """The lines of an example that hold the construct, else its first lines of substance."""
    rows = text.strip("\n").splitlines()
    picked = [rows[n - 1] for n in lines if 1 <= n <= len(rows)]
    if not picked:
        picked = [r for r in rows if r.strip() and not _BOILERPLATE.match(r)]
    return [r.strip() for r in picked[:EXAMPLE_LINES]]


def rule_answer(rule_id: str, text: str, meta: dict) -> dict:
    """A concept rule as an answer; from this kport's rules, else from the stored chunk."""
    r = rule(rule_id)
    if r is None:  # a KB built by another kport version: what the chunk says
        return {"rule_id": rule_id, "text": without_asked(text),
                "cuda": str(meta.get("cuda_constructs", "")).split(" | "),
                "metal": meta.get("metal_form", ""), "pitfalls": [],
                "example": None, "source": meta.get("origin", "")}
    ex = r.example
    cuda_src, metal_src = ex.cuda.strip("\n"), ex.metal.strip("\n")
    cuda_at = [n for h in match_rules(cuda_tokens(cuda_src), [r]) for n in h.lines]
    metal_at = metal_lines(metal_src, metal_markers(r.metal))
    return {"rule_id": r.id, "text": r.notes, "cuda": list(r.cuda), "metal": r.metal,
            "pitfalls": list(r.pitfalls),
            "example": {"cuda": _example_lines(cuda_src, cuda_at),
                        "metal": _example_lines(metal_src, metal_at)},
            "source": r.source, "unconfirmed": r.unconfirmed}


def fix_answer(fix_id: str, text: str) -> dict:
    found = next((f for f in load_fixes() if f.id == fix_id), None)
    if found is None:
        return {"fix_id": fix_id, "text": without_asked(text), "source": ""}
    return {"fix_id": fix_id, "error": found.example_error, "text": found.fix,
            "source": ", ".join(found.sources), "origin": found.origin,
            "unconfirmed": found.unconfirmed}


def _code_excerpt(text: str, meta: dict) -> list[str]:
    """The first lines of the kernel itself (a chunk holds the functions it calls first)."""
    rows = text.splitlines()[kernel_offset(meta, text) or 0:]
    return [r.rstrip() for r in "\n".join(rows).strip("\n").splitlines()[:EXCERPT_LINES]]


def _where(meta: dict) -> str:
    path, src = meta.get("path"), meta.get("source")
    where = f"{path}:{meta['start_line']}" if path and meta.get("start_line") else path or ""
    return f"{where} ({src})" if src and src not in str(where) else str(where or src or "")


def analogue_answer(hit: Hit) -> dict:
    meta = hit.metadata
    out = {"kernel": meta.get("kernel"), "language": meta.get("language"),
           "case": meta.get("case"), "source": _where(meta),
           "excerpt": _code_excerpt(hit.text, meta), "pair": None}
    if hit.pair:
        pm = hit.pair.get("metadata", {})
        out["pair"] = {"title": hit.pair.get("title"), "language": hit.pair.get("language"),
                       "source": _where(pm),
                       "excerpt": _code_excerpt(hit.pair.get("text", ""), pm)}
    return out


def answer(hit: Hit) -> dict:
    """The content of one hit as an answer (see the module docstring)."""
    meta = hit.metadata
    if meta.get("rule_id"):
        return rule_answer(str(meta["rule_id"]), hit.text, meta)
    if meta.get("fix_id"):
        return fix_answer(str(meta["fix_id"]), hit.text)
    if hit.kind == "analogues":
        return analogue_answer(hit)
    if meta.get("arch_id"):
        return {"arch_id": meta["arch_id"], "text": without_asked(hit.text),
                "source": _sources_of(hit.text)}
    return {"text": "\n".join(hit.text.strip().splitlines()[:EXCERPT_LINES]),
            "source": _where(meta)}


def _sources_of(text: str) -> str:
    m = re.search(r"Sources?: ([^\n]*)", text)
    return m.group(1).rstrip(".") if m else ""


def answers(hits: list[Hit], query: str, lines: bool = False) -> list[dict]:
    """Each hit's ``as_json()`` plus ``rank``, ``confidence`` (calibrated: kb/calibration.py),
    ``answer`` and ``lines``: with ``lines`` (a query that is a CUDA file's text), the lines
    of the query the hit concerns (else null); an analogue then also gets ``corresponds`` (the
    rules it shares with the query and its lines doing that work)."""
    is_code = query_view(query).is_code
    file = True if lines else None
    toks = cuda_tokens(query) if is_code or file is not None else []
    query_rules = match_rules(toks) if toks else []
    present = {h.rule_id for h in query_rules}
    out = []
    for rank, h in enumerate(hits, 1):
        row = {**h.as_json(), "rank": rank,
               "confidence": round(hit_confidence(h, rank, is_code, present), 3),
               "answer": answer(h), "lines": None}
        if file is not None:
            row["lines"] = hit_lines(h, query_rules, toks)
            if h.kind == "analogues":
                row["corresponds"] = analogue_correspondence(h, query_rules)
        out.append(row)
    return out


def analogue_correspondence(hit: Hit, query_rules) -> list[dict]:
    """The rules a kernel and the analogue ``hit`` share, with the analogue's lines (as
    ``path:line`` and code) doing that work on its CUDA and Metal sides. Rules found at the same
    lines on both the kernel and the analogue's CUDA side are one row (``rule_ids``; their Metal
    lines together): a shuffle butterfly is one piece of work, however many rules name it."""
    cuda, metal = analogue_sides(hit)
    metas = {hit.metadata.get("language"): hit.metadata}
    if hit.pair:
        metas.setdefault(hit.pair.get("language"), hit.pair.get("metadata", {}))
    rows: dict[tuple, dict] = {}
    for c in correspondence(query_rules, cuda, metal):
        sides = {side: [{"at": file_line(metas.get(side, {}), text, n), "code": code}
                        for n, code in excerpt(text or "", at)]
                 for side, text, at in (("cuda", cuda, c["cuda_lines"]),
                                        ("metal", metal, c["metal_lines"]))}
        key = (tuple(c["lines"]), tuple(x["at"] for x in sides["cuda"]))
        row = rows.get(key)
        if row is None:
            rows[key] = {"rule_id": c["rule_id"], "rule_ids": [c["rule_id"]],
                         "title": c["title"], "lines": c["lines"], **sides}
            continue
        row["rule_ids"].append(c["rule_id"])
        row["metal"] += [x for x in sides["metal"] if x not in row["metal"]]
    return list(rows.values())


def _lines_text(lines: list[int]) -> str:
    """1, 2, 3, 7 -> '1-3, 7'."""
    spans: list[list[int]] = []
    for n in sorted(set(lines)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)


def render(rows: list[dict], file: str | None = None) -> str:
    """The answers as text for people: per hit its rank, kind, title and calibrated score, then
    what it says (spellings, text, example pair, source) and the file's lines it concerns."""
    out: list[str] = []
    for row in rows:
        a, kind = row["answer"], row["kind"]
        label = a.get("rule_id") or a.get("fix_id") or a.get("arch_id") or ""
        out.append(f"{row['rank']:>2}. [{kind}] {label + ': ' if label else ''}{row['title']}"
                   f"   score {row['confidence']:.2f}")
        pad = "    "
        if "rule_id" in a:
            out.append(f"{pad}CUDA:    {', '.join(a['cuda'])}")
            out.append(f"{pad}Metal:   {_one(a['metal'])}")
            if a["text"]:
                out.append(f"{pad}{_one(a['text'], 200)}")
            out += [f"{pad}pitfall: {_one(p, 200)}" for p in a["pitfalls"][:2]]
            if a.get("example"):
                for side, name in (("cuda", "CUDA "), ("metal", "Metal")):
                    for i, line in enumerate(a["example"][side]):
                        out.append(f"{pad}{'example ' + name if i == 0 else ' ' * 13}  {line}")
        elif "fix_id" in a:
            if a.get("error"):
                out.append(f"{pad}error:   {_one(a['error'], 200)}")
            out.append(f"{pad}fix:     {_one(a['text'], 300)}")
        elif kind == "analogues":
            out.append(f"{pad}{a['language']} kernel {a['kernel']}")
            out += [f"{pad}  | {line}" for line in a["excerpt"][:4]]
            if a["pair"]:
                how = "ported as" if a["language"] == "cuda" else "port of"
                out.append(f"{pad}{how}: {a['pair']['title']} ({a['pair']['source']})")
                out += [f"{pad}  | {line}" for line in a["pair"]["excerpt"][:4]]
        else:
            out += [f"{pad}{_one(line, 200)}" for line in a["text"].splitlines()[:3]]
        if a.get("source"):
            out.append(f"{pad}source:  {a['source']}")
        if file is not None:
            where = (f"lines {_lines_text(row['lines'])} of {file}" if row["lines"]
                     else f"no particular line of {file}")
            out.append(f"{pad}concerns {where}")
            for c in row.get("corresponds", [])[:3]:
                metal = c.get("metal") or []
                how = f"{metal[0]['at']}: {metal[0]['code']}" if metal else "its CUDA side"
                out.append(f"{pad}  {', '.join(c['rule_ids'])} (your lines "
                           f"{_lines_text(c['lines'])}) -> {how}")
        out.append("")
    return "\n".join(out)


def _one(text: str, width: int = 160) -> str:
    """``text`` on one line, cut to ``width``."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."
