"""runners/timing.py's paired timing, run for real on MLX's CPU device (the same code a Mac runs
on its GPU through runners.mlx_metal.time_paired): ABBA order, warm-up by duration, the
statistics, the correctness gate that comes before any timing, and the versions recorded."""

import platform
import statistics
import time

import mlx.core as mx
import pytest

from runners import mlx_metal
from runners.timing import (
    FEWEST_ROUNDS,
    HeldOutCheck,
    abba_schedule,
    format_timing,
    kernel_stats,
    median_ci,
    platform_versions,
    quartiles,
    time_paired,
    warm_up,
)

needs_no_metal = pytest.mark.skipif(mx.metal.is_available(), reason="this machine has Metal")
needs_metal = pytest.mark.skipif(not mx.metal.is_available(),
                                 reason="timing on an Apple GPU needs Apple Silicon with Metal")
QUICK = dict(warmup_s=0.02, max_warmup_s=0.2, min_runs=12, max_s=0.5)


def softmax(x):
    return mx.exp(x - mx.max(x, axis=-1, keepdims=True)) / mx.sum(
        mx.exp(x - mx.max(x, axis=-1, keepdims=True)), axis=-1, keepdims=True)


def make_rows(n=256):
    return lambda: mx.random.normal((64, n))


def always(label="shape (3, 5)"):
    return [HeldOutCheck(label, lambda: "")]


def test_abba_order_gives_every_kernel_the_same_mean_position():
    assert abba_schedule(["A", "B"], 2) == ["A", "B", "B", "A", "A", "B", "B", "A"]
    one = abba_schedule(["A", "B", "C"], 1)
    assert one == ["A", "B", "C", "C", "B", "A"]
    assert len({sum(i for i, n in enumerate(one) if n == k) for k in "ABC"}) == 1


def test_statistics_on_known_values():
    assert quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == (2.0, 3.0, 4.0)
    # 95% order-statistic interval of a median: x(1)..x(6) for 6 values, x(2)..x(9) for 10
    assert median_ci([6, 1, 5, 2, 4, 3]) == (1, 6)
    assert median_ci(list(range(1, 11))) == (2, 9)
    assert median_ci(list(range(1, 101))) == (40, 61)  # binomial(100, 1/2): k = 40
    assert median_ci([1.0, 2.0, 3.0]) == (1.0, 3.0)  # too few for 95%: the whole range
    s = kernel_stats([1.0, 2.0, 3.0, 4.0, 100.0], predicted_s=2.5)
    assert (s.runs, s.median_s, s.iqr_s, s.min_s, s.max_s, s.predicted_s) == (
        5, 3.0, 2.0, 1.0, 100.0, 2.5)


def test_paired_timing_follows_abba_and_measures_a_real_difference():
    """Softmax of 64 x 256 against the same softmax on 16x the data: the candidate must come out
    faster by a wide margin, with a recorded ABBA schedule and the intervals around it."""
    big = mx.random.normal((64 * 16, 256))
    result = time_paired(mx.softmax, {"large": lambda _: mx.softmax(big)}, make_rows(),
                         held_out=always(), **QUICK)
    assert not result.refused and result.checks == [
        {"label": "shape (3, 5)", "ok": True, "why": ""}]
    rounds = len(result.schedule) // 4
    assert rounds >= FEWEST_ROUNDS and result.schedule == abba_schedule(
        ["candidate", "large"], rounds)
    cand, large = result.kernels["candidate"], result.kernels["large"]
    assert cand.runs == large.runs == 2 * rounds
    assert cand.q1_s <= cand.median_s <= cand.q3_s and cand.min_s <= cand.q1_s
    assert cand.median_ci_s[0] <= cand.median_s <= cand.median_ci_s[1]
    speed = result.speedups["large"]
    assert speed.rounds == rounds and speed.ci[0] <= speed.median <= speed.ci[1]
    assert speed.median > 3, speed  # 16x the work; a mis-paired or unsynchronised timer says ~1
    assert result.stopped and result.warmup["calls"] >= 2


def test_three_kernels_against_mx_compile_of_the_same_function():
    result = time_paired(softmax, {"mx.softmax": mx.softmax, "compiled": mx.compile(softmax)},
                         make_rows(), held_out=always(), **QUICK)
    rounds = len(result.schedule) // 6
    assert result.schedule == abba_schedule(["candidate", "mx.softmax", "compiled"], rounds)
    assert set(result.speedups) == {"mx.softmax", "compiled"}
    assert all(s.median > 0 for s in result.speedups.values())


def test_each_call_gets_fresh_inputs_made_outside_the_clock():
    made, seen = [], []

    def make():
        made.append(mx.random.normal((8,)))
        return made[-1]

    def kernel(x):
        seen.append(x)
        return x * 2

    result = time_paired(kernel, {"b": lambda x: x + 1}, make, held_out=always(), **QUICK)
    assert len(made) == len(result.schedule) + result.warmup["calls"]
    assert len({id(x) for x in seen}) == len(seen)


def test_the_clock_holds_the_work_and_only_the_work():
    """A kernel that sleeps 2 ms measures about 2 ms; making its inputs (20 ms) is outside."""
    def slow_inputs():
        time.sleep(0.02)
        return mx.zeros((4,))

    def sleepy(x):
        time.sleep(0.002)
        return x + 1

    result = time_paired(sleepy, {"fast": lambda x: x + 1}, slow_inputs, held_out=always(),
                         warmup_s=0.01, max_warmup_s=0.1, min_runs=6, max_s=0.05)
    assert 0.0019 < result.kernels["candidate"].median_s < 0.01
    assert result.kernels["fast"].median_s < 0.001


def test_warm_up_lasts_at_least_its_duration_and_stops_at_its_cap():
    done = warm_up({"a": mx.softmax, "b": mx.softmax}, make_rows(), min_s=0.1, max_s=2.0)
    assert done["seconds"] >= 0.1 and done["calls"] % 4 == 0
    if done["stable"]:
        assert done["seconds"] < 2.0 + 0.5

    # a kernel that gets slower with every call never settles: the cap ends the warm-up
    calls = []

    def slower(x):
        calls.append(1)
        time.sleep(0.0002 * len(calls))
        return x

    capped = warm_up({"a": slower}, make_rows(8), min_s=0.0, max_s=0.2)
    assert not capped["stable"] and 0.2 <= capped["seconds"] < 0.5


def odd_wrong_softmax(x):
    """Right where the row length is even, wrong where it is odd: a kernel special-cased for
    the benchmark's shape."""
    y = mx.softmax(x, axis=-1)
    return y if x.shape[-1] % 2 == 0 else y * 1.01


def softmax_check(kernel, n):
    def run():
        x = mx.random.normal((3, n))
        want, got = mx.softmax(x, axis=-1), kernel(x)
        return "" if mx.allclose(got, want, rtol=1e-5, atol=1e-7).item() else \
            f"max error {mx.max(mx.abs(got - want)).item():.3g}"
    return HeldOutCheck(f"n = {n}", run)


def test_a_kernel_wrong_at_a_held_out_shape_is_refused_and_never_timed():
    timed = []

    def candidate(x):
        timed.append(x)
        return odd_wrong_softmax(x)

    checks = [softmax_check(odd_wrong_softmax, n) for n in (256, 2 * 256 + 1, 64)]
    result = time_paired(candidate, {"mx.softmax": mx.softmax}, make_rows(), held_out=checks,
                         **QUICK)
    assert result.refused.startswith("incorrect at n = 513: max error")
    assert [c["ok"] for c in result.checks] == [True, False]  # stops at the first failure
    assert timed == [] and result.kernels == {} and result.schedule == []
    assert format_timing(result)[-1].startswith("not timed: incorrect at n = 513")

    right = [softmax_check(lambda x: mx.softmax(x, axis=-1), n) for n in (256, 513)]
    assert not time_paired(mx.softmax, {}, make_rows(), held_out=right, **QUICK).refused


def test_no_timing_without_held_out_checks():
    with pytest.raises(ValueError, match="held-out"):
        time_paired(mx.softmax, {}, make_rows(), held_out=[], **QUICK)
    with pytest.raises(ValueError, match="candidate"):
        time_paired(mx.softmax, {"candidate": mx.softmax}, make_rows(), held_out=always())


def test_versions_are_recorded_and_the_prediction_printed_beside():
    v = platform_versions()
    assert v["mlx"] == mx.__version__ and v["macos"] == platform.mac_ver()[0]
    assert v["device"] == str(mx.default_device()) and v["metal_available"] is (
        mx.metal.is_available())
    result = time_paired(mx.softmax, {"twice": lambda x: mx.softmax(mx.softmax(x))},
                         make_rows(), held_out=always(), predicted_s={"candidate": 1e-5},
                         **QUICK)
    assert result.versions == v and result.to_dict()["versions"] == v
    lines = format_timing(result)
    assert f"MLX {mx.__version__}" in lines[0]
    cand = next(x for x in lines if x.startswith("candidate:"))
    ratio = 1e-5 / result.kernels["candidate"].median_s
    assert "predicted 10.00 us" in cand and f"({ratio:.2f}x of measured)" in cand
    assert "no prediction" in next(x for x in lines if x.startswith("twice:"))
    assert any(x.startswith("speedup vs twice: ") for x in lines)


def test_speedup_is_the_median_of_paired_round_ratios():
    big = mx.random.normal((64 * 4, 256))
    result = time_paired(mx.softmax, {"b": lambda _: mx.softmax(big)}, make_rows(),
                         held_out=always(), **QUICK)
    cand, base = result.samples_s["candidate"], result.samples_s["b"]
    ratios = [(base[i] + base[i + 1]) / (cand[i] + cand[i + 1]) for i in range(0, len(cand), 2)]
    assert result.speedups["b"].median == pytest.approx(statistics.median(ratios))
    assert result.speedups["b"].ci == median_ci(ratios)
    assert result.kernels["b"].median_s == pytest.approx(statistics.median(base))


@needs_no_metal
def test_mlx_metal_time_paired_refuses_without_metal():
    with pytest.raises(RuntimeError, match="Apple Silicon"):
        mlx_metal.time_paired(mx.softmax, {}, make_rows(), held_out=always())


@needs_metal
def test_mlx_metal_time_paired_on_the_gpu():
    result = mlx_metal.time_paired(mx.softmax, {"compiled": mx.compile(softmax)}, make_rows(),
                                   held_out=always(), **QUICK)
    assert result.versions["macos"] and result.versions["device_name"]
    assert "gpu" in result.versions["device"]
    assert result.kernels["candidate"].median_s > 0
