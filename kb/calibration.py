"""A calibrated score for search hits: the probability that a hit answers its query.

The fused rank score (reciprocal-rank fusion) orders hits but means nothing across queries. A
logistic model per query type (a text question, or CUDA code) maps what retrieval saw of a hit
to the share of such hits that answered a labeled query: its dense cosine, how highly each
channel ranked it (dense, BM25 over text, BM25 over names, the port name match of a CUDA
query; 1/rank, 0 when a channel missed it) and its place in the returned list. The prose
channel is left out: it ranks knowledge chunks almost as BM25 over their text does, and with it
the text model calibrated worse on held-out questions (ECE 0.046, against 0.035 without). For a
code query a concept rule needs no model: exact matching says whether its construct is in the
code. The coefficients live in
kb/rules/score_calibration.json, fitted by ``python -m evals.calibrate_kb`` on labeled queries
(half fitted, the other half held out for the reliability table in docs/kb.md); refit them
after changing the ranking.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

CALIBRATION = Path(__file__).resolve().parent / "rules" / "score_calibration.json"
CHANNELS = ("dense", "bm25", "names", "port")
FEATURES = ("cosine", "dense_rr", "bm25_rr", "names_rr", "port_rr", "position_rr")


def features(ranks: dict, position: int) -> list[float]:
    """The model's inputs for a hit: its ``ranks`` (kb.search.Hit.ranks) and its 1-based
    ``position`` in the list returned."""
    dense = ranks.get("dense") or {}
    out = [float(dense.get("score", 0.0))]
    out += [1.0 / ranks[c]["rank"] if c in ranks else 0.0 for c in CHANNELS]
    return out + [1.0 / position]


@functools.cache
def _models(path: Path = CALIBRATION) -> dict:
    return json.loads(path.read_text())["models"]


def confidence(ranks: dict, position: int, is_code: bool) -> float:
    """P(the hit answers the query), from the fitted model of the query's type; in [0, 1]."""
    model = _models()["code" if is_code else "text"]
    z = model["bias"] + sum(w * x for w, x in zip(model["weights"],
                                                   features(ranks, position), strict=True))
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def hit_confidence(hit, position: int, is_code: bool, code_rules: set[str]) -> float:
    """The calibrated score of a kb.search.Hit at ``position``. For a CUDA-code query a concept
    rule is certain either way: 1.0 when its construct occurs in the code (``code_rules``, exact
    matching), 0.0 when it does not; every other hit takes its query type's model (the code
    model is fitted on analogue hits: P(an expert port of the same op))."""
    rule_id = hit.metadata.get("rule_id")
    if is_code and rule_id:
        return 1.0 if rule_id in code_rules else 0.0
    return confidence(hit.ranks, position, is_code)
