"""Fit the calibrated score of `kport kb search` (kb/calibration.py) and measure how well it holds.

    python -m evals.calibrate_kb [--llama DIR_OR_SDIST] [--write] [--workdir DIR]

Labeled queries: text questions (evals/data/kb_calibration_questions.toml, each with every id
that answers it) and CUDA code (every corpus kernel, and with --llama the labeled llama.cpp
kernels of evals/data/kb_labeled_llama.toml). A code query's answer is its expert Metal port;
its own CUDA chunk is left out of the search, as a kernel new to the KB would be. Only the
analogue hits of code queries enter its fit: whether a rule hit applies to code is decided by
exact matching, not by a model (kb.calibration.hit_confidence). The store is the default KB
(plus llama.cpp), built in a temporary folder with the usual embedding cache.

Queries at even positions fit a logistic model per query type (Newton's method, a small L2);
odd ones are held out: the reliability table (predicted vs observed share of answers per bin),
the expected calibration error and the Brier score are printed (also for the coefficients kport
ships, so a ranking change that breaks them shows), and with --write saved with the
coefficients to kb/rules/score_calibration.json.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import tomllib
from pathlib import Path

import numpy as np

from evals.bench_kb import LABELS
from kb.calibration import CALIBRATION, FEATURES, features
from kb.llama_cpp import import_llama_cpp
from kb.ready import default_chunks
from kb.search import search
from kb.store import KBStore

QUESTIONS = Path(__file__).parent / "data" / "kb_calibration_questions.toml"
K = 10
L2 = 1e-2
BINS = (0.0, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 1.0001)


def hit_key(hit) -> str:
    """The id a label names: a rule, fact or fix id, or the case of an analogue."""
    m = hit.metadata
    return str(m.get("rule_id") or m.get("arch_id") or m.get("fix_id") or m.get("case")
               or hit.id)


def labeled_queries(chunks, llama: list) -> dict[str, list[tuple[str, set, set, set]]]:
    """{'text': [...], 'code': [...]} of (query, answer keys, answer chunk ids, excluded
    ids)."""
    text = [(q["text"], set(q["answers"]), set(), set())
            for q in tomllib.loads(QUESTIONS.read_text())["q"]]
    code = []
    by_id = {c.id: c for c in chunks}
    for c in chunks:
        if c.metadata.get("pair_role") == "cuda" and c.metadata.get("case"):
            code.append((c.text, set(), {by_id[c.metadata["pair_id"]].id}, {c.id}))
    if llama:
        metal = {}
        for c in llama:
            if c.metadata.get("language") == "metal":
                metal.setdefault(str(c.metadata.get("kernel")), set()).add(c.id)
        cuda = {str(c.metadata.get("kernel")): c for c in llama
                if c.metadata.get("language") == "cuda"}
        for row in tomllib.loads(LABELS.read_text())["pair"]:
            want = set().union(*(metal.get(m, set()) for m in row["metal"]))
            if row["cuda"] in cuda and want:
                code.append((cuda[row["cuda"]].text, set(), want, {cuda[row["cuda"]].id}))
    return {"text": text, "code": code}


def observations(store, queries, cache: Path, code: bool) -> list[list[tuple[list, int]]]:
    """Per query, (features, 1 if an answer else 0) of each labeled hit of its top K."""
    out = []
    for query, keys, ids, exclude in queries:
        hits = search(store, query, k=K, cache_root=cache, exclude=exclude)
        rows = []
        for pos, h in enumerate(hits, 1):
            if code and h.kind != "analogues":
                continue  # rules: exact matching decides (kb.calibration.hit_confidence)
            good = h.id in ids or (not code and hit_key(h) in keys)
            rows.append((features(h.ranks, pos), int(good)))
        out.append(rows)
    return out


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Logistic regression by Newton's method with an L2 penalty on the weights."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    reg = np.eye(xb.shape[1]) * L2
    reg[-1, -1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-xb @ w))
        grad = xb.T @ (p - y) + reg @ w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + reg
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def reliability(p: np.ndarray, y: np.ndarray) -> dict:
    """Bins of predicted probability with their mean prediction and observed share; ECE, Brier."""
    bins, ece = [], 0.0
    for lo, hi in zip(BINS, BINS[1:], strict=False):
        sel = (p >= lo) & (p < hi)
        if sel.any():
            bins.append([lo, min(hi, 1.0), int(sel.sum()), round(float(p[sel].mean()), 3),
                         round(float(y[sel].mean()), 3)])
            ece += sel.sum() / len(p) * abs(p[sel].mean() - y[sel].mean())
    return {"hits": len(p), "answers": int(y.sum()), "ece": round(float(ece), 3),
            "brier": round(float(((p - y) ** 2).mean()), 3), "bins": bins}


def _arrays(per_query) -> tuple[np.ndarray, np.ndarray]:
    rows = [r for q in per_query for r in q]
    return np.array([r[0] for r in rows], float), np.array([r[1] for r in rows], float)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama", type=Path, help="llama.cpp checkout or llama-cpp-python sdist")
    ap.add_argument("--write", action="store_true", help=f"save to {CALIBRATION}")
    ap.add_argument("--workdir", type=Path, help="where the temporary store goes")
    args = ap.parse_args(argv)
    chunks = default_chunks()
    shipped = json.loads(CALIBRATION.read_text())["models"] if CALIBRATION.is_file() else {}
    llama = import_llama_cpp(args.llama)[0] if args.llama else []
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        store = KBStore(Path(tmp) / "kb", create=True)
        store.add(chunks + llama)
        result = {"fitted_by": "python -m evals.calibrate_kb"
                  + (" --llama" if args.llama else ""), "features": list(FEATURES),
                  "k": K, "models": {}, "held_out": {}, "shipped_held_out": {}}
        for kind, queries in labeled_queries(chunks, llama).items():
            obs = observations(store, queries, Path(tmp) / "cache", kind == "code")
            x, y = _arrays(obs[0::2])
            w, b = fit(x, y)
            result["models"][kind] = {"weights": [round(float(v), 4) for v in w],
                                      "bias": round(b, 4), "queries": len(obs[0::2]),
                                      "hits": len(y)}
            hx, hy = _arrays(obs[1::2])
            p = 1.0 / (1.0 + np.exp(-(hx @ w + b)))
            result["held_out"][kind] = {"queries": len(obs[1::2]), **reliability(p, hy)}
            if len(shipped.get(kind, {}).get("weights", ())) == len(FEATURES):
                # how the coefficients kport ships fare on today's ranking (when they read the
                # same features)
                m = shipped[kind]
                p = 1.0 / (1.0 + np.exp(-(hx @ np.array(m["weights"]) + m["bias"])))
                result["shipped_held_out"][kind] = reliability(p, hy)
    print(table(result))
    if args.write:
        CALIBRATION.write_text(dumps({k: v for k, v in result.items()
                                      if k != "shipped_held_out"}))
        print(f"wrote {CALIBRATION}")
    return result


def table(result: dict) -> str:
    """The fitted models and the held-out reliability, as Markdown."""
    out = []
    for kind, model in result["models"].items():
        held = result["held_out"][kind]
        out += [f"{kind}: fitted on {model['queries']} queries ({model['hits']} hits); held out "
                f"{held['queries']} queries, {held['hits']} hits, {held['answers']} answers: "
                f"ECE {held['ece']}, Brier {held['brier']}", "",
                "| predicted | hits | mean predicted | observed |", "|---|---|---|---|"]
        out += [f"| {lo:.2f}-{hi:.2f} | {n} | {mp:.2f} | {ob:.2f} |"
                for lo, hi, n, mp, ob in held["bins"]]
        if kind in result.get("shipped_held_out", {}):
            old = result["shipped_held_out"][kind]
            out += ["", f"the shipped coefficients on the same held-out hits: ECE {old['ece']}, "
                    f"Brier {old['brier']}"]
        out.append("")
    return "\n".join(out)


def dumps(result: dict) -> str:
    """JSON with each reliability bin on one line (the file is read in reviews)."""
    text = json.dumps(result, indent=1)
    return re.sub(r"\[\s+([-0-9.,\s]+?)\s+\]",
                  lambda m: "[" + ", ".join(m[1].replace(",", " ").split()) + "]", text) + "\n"


if __name__ == "__main__":
    main()
