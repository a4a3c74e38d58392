"""The held-out set of the cost model (docs/perf-model.md, "Held-out validation"): kept out of
the variants the model was shaped with, predicted before it was timed, and never re-predicted
once times exist."""

from __future__ import annotations

import json

import pytest

import evals.perf_validate as pv
from evals.perf_cases import HELDOUT_VARIANTS, VARIANTS


def test_heldout_variants_are_apart_from_the_shaping_set():
    assert len(HELDOUT_VARIANTS) >= 12
    assert all(v.family.startswith("heldout_") for v in HELDOUT_VARIANTS)
    assert not any(v.family.startswith("heldout_") for v in VARIANTS)
    assert not {v.name for v in HELDOUT_VARIANTS} & {v.name for v in VARIANTS}
    assert not {v.file for v in HELDOUT_VARIANTS} & {v.file for v in VARIANTS}


def test_the_default_report_and_counting_never_see_heldout_variants():
    counters = json.loads(pv.HELDOUT_COUNTERS.read_text())
    assert set(counters) == {v.name for v in HELDOUT_VARIANTS}
    # the path the model was shaped with predicts only VARIANTS, whatever counters it is given
    assert not pv.predictions({**json.loads(pv.COUNTERS.read_text()), **counters}).keys() & \
        set(counters)


def test_saved_predictions_cover_the_set_and_name_the_model_commit():
    saved = json.loads(pv.HELDOUT_PREDICTIONS.read_text())
    assert set(saved["predictions"]) == {v.name for v in HELDOUT_VARIANTS}
    assert len(saved["model_commit"]) == 40 and saved["model_uncommitted_changes"] is False
    assert all(p["predicted_s"] > 0 for p in saved["predictions"].values())


def test_predicting_again_is_refused_once_times_exist(tmp_path, monkeypatch):
    times = tmp_path / "times.json"
    times.write_text("{}")
    monkeypatch.setattr(pv, "HELDOUT_TIMES", times)
    monkeypatch.setattr(pv, "HELDOUT_PREDICTIONS", tmp_path / "pred.json")
    with pytest.raises(SystemExit, match="before the times"):
        pv.heldout_predict()
    assert not (tmp_path / "pred.json").exists()


def test_the_heldout_report_scores_the_saved_predictions_against_every_time():
    saved = json.loads(pv.HELDOUT_PREDICTIONS.read_text())["predictions"]
    times = json.loads(pv.HELDOUT_TIMES.read_text())
    assert {r["name"] for r in times["results"] if r.get("median_s", 0) > 0} == set(saved)
    r = pv.report({}, times, pred=saved, variants=HELDOUT_VARIANTS)
    assert r["n"] == len(HELDOUT_VARIANTS)
    assert all(row["predicted_s"] == saved[row["name"]]["predicted_s"] for row in r["rows"])
    assert -1.0 <= r["spearman"] <= 1.0 and r["median_ratio"] > 0
