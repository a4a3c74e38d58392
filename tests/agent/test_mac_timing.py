"""agent/mac_timing.py's rules that run anywhere: where a candidate must be correct before it is
timed, and the correctness gate itself, run on MLX's CPU device with real MLX functions in place
of the Metal kernel (the Mac path builds the kernel with runners.mlx_metal instead)."""

import random

import mlx.core as mx
import pytest

from agent.mac_timing import (
    correct_at,
    gate_size_sets,
    mlx_kernel,
    mx_inputs,
    stretched_sizes,
    time_case,
)
from corpus.candidate import Candidate
from corpus.cases import discover
from corpus.check import make_inputs
from corpus.mlx_baselines import mlx_baseline
from runners.timing import HeldOutCheck, time_paired

CASES = {c.id: c for c in discover()}
SOFTMAX = CASES["011_softmax_naive"]  # rows 8, n 1024; variants (5, 997), (3, 61)


def test_stretched_sizes_double_and_add_one_to_the_sizes_that_vary():
    assert stretched_sizes(SOFTMAX) == {"rows": 17, "n": 2049}
    fixed_head = CASES["037_flash_attention_fwd_d64"]  # head dim 64 is not a size
    assert set(stretched_sizes(fixed_head)) == set(fixed_head.sizes)


def test_a_case_whose_constraints_forbid_odd_sizes_gets_no_stretched_set():
    bitonic = CASES["027_bitonic_sort_rows"]
    assert any("&" in c for c in bitonic.check.constraints)  # npad is a power of two
    assert stretched_sizes(bitonic) is None


def test_gate_sets_are_the_timed_sizes_then_held_out_ones():
    sets = gate_size_sets(SOFTMAX, dict(SOFTMAX.sizes), random.Random(3))
    labels = [label for label, _ in sets]
    assert labels[0].startswith("the timed sizes") and sets[0][1] == SOFTMAX.sizes
    assert labels[1] == "stretched sizes {'rows': 17, 'n': 2049}"
    assert labels[2].startswith("held-out sizes") and sets[2][1] not in SOFTMAX.size_sets()


def builder(case, wrong_when_odd=False):
    """An MLX function of the case's inputs, built per size set (as port_kernel builds a
    Metal kernel): the case's MLX baseline, or one wrong only where n is odd."""
    def build(sizes):
        _, fn = mlx_baseline(case.id, {"n": sizes["n"]})
        if not wrong_when_odd or sizes["n"] % 2 == 0:
            return fn
        return lambda values: {"y": fn(values)["y"] * 1.01}
    return build


def test_the_gate_passes_a_right_function_and_fails_one_wrong_at_odd_sizes():
    sizes = dict(SOFTMAX.sizes)
    stretched = stretched_sizes(SOFTMAX)
    assert correct_at(SOFTMAX, builder(SOFTMAX), sizes, 5) == ""
    assert correct_at(SOFTMAX, builder(SOFTMAX), stretched, 5) == ""
    assert correct_at(SOFTMAX, builder(SOFTMAX, True), sizes, 5) == ""  # n = 1024: even
    why = correct_at(SOFTMAX, builder(SOFTMAX, True), stretched, 5)  # n = 2049
    assert "elements differ" in why


def test_an_mlx_error_is_a_reason_not_a_crash():
    def broken(_sizes):
        return lambda values: {"y": mx.reshape(values["x"], (7, 7))}
    assert correct_at(SOFTMAX, broken, dict(SOFTMAX.sizes), 0).startswith("MLX: ")


@pytest.mark.skipif(mx.metal.is_available(), reason="this machine has Metal")
def test_time_case_is_none_without_metal():
    assert time_case(Candidate.from_case(SOFTMAX), SOFTMAX, dict(SOFTMAX.sizes)) is None


@pytest.mark.skipif(not mx.metal.is_available(),
                    reason="timing a Metal port needs Apple Silicon with Metal")
def test_time_case_times_the_expert_port_against_itself_and_mlx():
    out = time_case(Candidate.from_case(SOFTMAX), SOFTMAX, dict(SOFTMAX.sizes),
                    predicted_s=2e-5, warmup_s=0.1, max_s=1.0)
    assert not out["refused"] and out["median_s"] > 0
    assert set(out["baselines"]) == {"expert", "mlx"} and all(c["ok"] for c in out["checks"])
    assert 0.5 < out["speedup"] < 2  # the same kernel twice
    assert any("predicted 20.00 us" in line for line in out["lines"])
    assert out["versions"]["macos"] and out["versions"]["device_name"]


def test_the_mac_path_without_the_metal_kernel_runs_on_the_cpu():
    """time_case's pipeline with MLX functions in place of the Metal ports: the gate at the
    timed, stretched and held-out sizes, then paired timing against the MLX baseline, on fresh
    case inputs; the one wrong at odd sizes is refused at the stretched sizes."""
    sizes, seeds = dict(SOFTMAX.sizes), iter(range(100, 10**6))
    gate = gate_size_sets(SOFTMAX, sizes, random.Random(1))
    for wrong in (False, True):
        checks = [HeldOutCheck(label, lambda s=s, w=wrong: correct_at(
            SOFTMAX, builder(SOFTMAX, w), s, 11)) for label, s in gate]
        _, baseline = mlx_kernel(SOFTMAX, sizes)
        result = time_paired(builder(SOFTMAX, wrong)(sizes), {"mlx": baseline},
                             lambda: mx_inputs(SOFTMAX, make_inputs(SOFTMAX, sizes, next(seeds))),
                             held_out=checks, warmup_s=0.02, max_warmup_s=0.2, min_runs=6,
                             max_s=0.3)
        if wrong:
            assert result.refused.startswith("incorrect at stretched sizes")
            assert not result.schedule
        else:
            assert [c["ok"] for c in result.checks] == [True] * len(gate) and len(gate) == 3
            assert result.kernels["candidate"].runs >= 12 and result.speedups["mlx"].median > 0
