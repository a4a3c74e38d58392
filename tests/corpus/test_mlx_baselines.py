"""corpus/mlx_baselines.py: every MLX baseline computes its case's outputs, checked against the
case's own reference at every size set, on MLX's CPU device (the same ops a Mac runs on its GPU)."""

import mlx.core as mx
import numpy as np
import pytest

from agent.mac_timing import mlx_kernel, mx_inputs
from corpus.cases import discover
from corpus.check import compare, make_inputs, run_reference
from corpus.mlx_baselines import BASELINES, mlx_baseline

CASES = {c.id: c for c in discover()}


def baseline_outputs(case, sizes, values) -> dict:
    _, fn = mlx_kernel(case, sizes)  # as the Mac times it: on padded inputs
    got = fn(mx_inputs(case, values))
    mx.eval(list(got.values()))
    return {k: np.array(v) for k, v in got.items()}


def test_every_baseline_names_a_bundled_case():
    assert set(BASELINES) <= set(CASES)
    assert mlx_baseline("037_flash_attention_fwd_d64", {}) is None


@pytest.mark.parametrize("case_id", sorted(BASELINES))
def test_the_baseline_matches_the_reference_at_every_size_set(case_id):
    case = CASES[case_id]
    for sizes in case.size_sets():
        values = make_inputs(case, sizes, 7)
        want = run_reference(case, sizes, values)
        got = baseline_outputs(case, sizes, values)
        assert set(got) == set(want), f"{case_id}: outputs {set(got)} vs {set(want)}"
        ok, err, why = compare(case, want, got)
        assert ok, f"{case_id} at {sizes}: {why}"


def test_a_wrong_baseline_would_fail_the_same_comparison():
    case = CASES["011_softmax_naive"]
    values = make_inputs(case, case.sizes, 7)
    got = baseline_outputs(case, case.sizes, values)
    ok, _, why = compare(case, run_reference(case, case.sizes, values),
                         {"y": got["y"] * np.float32(1.001)})
    assert not ok and "differ" in why
