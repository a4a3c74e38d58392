"""The cost model (runners/perf_model.py) and its validation against the H200 times saved in
evals/data (docs/perf-model.md): the correlation is recomputed offline from the saved counters
and measurements, so a change to the model that breaks it fails here."""

from __future__ import annotations

import json

import pytest

from evals.perf_cases import VARIANTS
from evals.perf_validate import COUNTERS, TIMES, report, spearman
from kb.arch import ArchError
from kb.perf_chips import perf_chip, perf_chips
from runners.perf_model import Launch, predict, scale_counters


@pytest.fixture(scope="module")
def validation() -> dict:
    return report(json.loads(COUNTERS.read_text()), json.loads(TIMES.read_text()))


def test_at_least_40_variants_were_measured_and_predicted(validation):
    assert len(VARIANTS) >= 40
    assert validation["n"] == len(VARIANTS)


def test_rank_correlation_over_all_variants(validation):
    assert validation["spearman"] >= 0.8


def test_rank_correlation_within_each_family(validation):
    low = {f: round(v["spearman"], 3) for f, v in validation["families"].items()
           if v["spearman"] < 0.7}
    assert not low


def test_median_ratio_is_within_a_factor_of_two(validation):
    assert 0.5 <= validation["median_ratio"] <= 2.0


def test_spearman_of_known_orders():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)


def _streaming(sectors_per_instr: int) -> dict:
    """A copy of 2^26 floats by 2^21 warps, loads touching ``sectors_per_instr`` sectors."""
    warps = 1 << 21
    return {"global_load_instructions": warps, "global_load_sectors": warps * sectors_per_instr,
            "global_load_segments64": warps * sectors_per_instr,
            "global_load_group_segments64": warps * sectors_per_instr,
            "global_store_instructions": warps, "global_store_sectors": warps * 4,
            "footprint_sectors": warps * (sectors_per_instr + 4), "groups": 1 << 18,
            "threads": 1 << 26, "lane_accesses": 1 << 27}


def test_strided_loads_predict_slower_than_coalesced_on_h200():
    chip, launch = perf_chip("H200"), Launch(groups=1 << 18, threads_per_group=256)
    fast = predict(_streaming(4), launch, chip)
    slow = predict(_streaming(32), launch, chip)
    assert fast.bottleneck == slow.bottleneck == "dram"
    assert slow.predicted_s > 4 * fast.predicted_s


def test_the_same_counters_take_longer_on_an_m2_than_on_an_h200():
    launch = Launch(groups=1 << 18, threads_per_group=256)
    m2 = predict(_streaming(4), launch, perf_chip("M2")).predicted_s
    h200 = predict(_streaming(4), launch, perf_chip("h200")).predicted_s
    assert m2 > 10 * h200  # 100 GB/s against 4.8 TB/s


def test_scaling_a_counted_prefix_to_the_whole_grid():
    counted = {"groups": 4, "global_load_sectors": 40, "shared_bytes_per_group": 4096,
               "footprint_sectors": 80}
    scaled = scale_counters(counted, 400, buffer_bytes=32 * 1000)
    assert scaled["global_load_sectors"] == 4000
    assert scaled["shared_bytes_per_group"] == 4096  # per group: not scaled
    assert scaled["footprint_sectors"] == 2000  # capped at reading and writing every buffer


def test_unknown_chip_names_the_known_ones():
    with pytest.raises(ArchError, match="unknown chip 'Z80'; one of H200, M1"):
        perf_chip("Z80")
    assert {"H200", "M2", "M4 Max"} <= set(perf_chips())
