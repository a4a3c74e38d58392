"""timing: paired, alternating timing of MLX callables on one clock, and its statistics.

``time_paired`` times a candidate against baselines the way a fair comparison on one GPU
must: a correctness gate at held-out shapes first (a candidate that fails is refused, never
timed), warm-up by duration until the time per call stops moving, then rounds in ABBA order
(A B C C B A for three) so drift and thermal state fall on every kernel alike; each call gets
fresh inputs, evaluated and synchronised before the clock starts, and the clock stops only
after ``mx.eval`` of its outputs and ``mx.synchronize()``. Results are medians, quartiles and
paired speedups with distribution-free (order-statistic) confidence intervals.

It is pure MLX: runners.mlx_metal.time_paired runs it on a Mac's GPU; tests run the same code
on MLX's CPU device.
"""

from __future__ import annotations

import math
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

Kernel = Callable[[Any], Any]  # inputs -> outputs (lazy mx.arrays, in any tree)
FEWEST_ROUNDS = 6  # the fewest paired rounds whose median has a 95% order-statistic interval


@dataclass(frozen=True)
class HeldOutCheck:
    """One correctness check the candidate must pass before it is timed: ``run()`` returns ""
    when the candidate is correct there, else why not; ``label`` says where (e.g. the sizes)."""

    label: str
    run: Callable[[], str]


@dataclass(frozen=True)
class KernelStats:
    """One kernel's timed calls, in seconds."""

    runs: int
    median_s: float
    q1_s: float
    q3_s: float
    iqr_s: float
    min_s: float
    max_s: float
    median_ci_s: tuple[float, float]  # order-statistic interval of the median
    predicted_s: float | None = None  # the cost model's prediction, when the caller has one


@dataclass(frozen=True)
class Speedup:
    """baseline time / candidate time, per paired round (> 1: the candidate is faster)."""

    baseline: str
    median: float
    ci: tuple[float, float]
    rounds: int


@dataclass
class PairedTiming:
    """What ``time_paired`` measured, or why it refused (``refused`` non-empty, no timings)."""

    checks: list[dict]  # {"label", "ok", "why"} of the correctness gate, in order
    refused: str = ""
    kernels: dict[str, KernelStats] = field(default_factory=dict)
    speedups: dict[str, Speedup] = field(default_factory=dict)
    schedule: list[str] = field(default_factory=list)  # every timed call's kernel, in order
    samples_s: dict[str, list[float]] = field(default_factory=dict)  # each kernel's, in order
    warmup: dict = field(default_factory=dict)  # {"seconds", "calls", "stable"}
    stopped: str = ""  # why measuring ended
    confidence: float = 0.95
    versions: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain JSON-ready data (tuples as lists)."""
        return asdict(self)


def abba_schedule(names: Sequence[str], rounds: int) -> list[str]:
    """``rounds`` rounds of the names forward then backward: A B B A, A B C C B A, ... Each
    name's mean position in a round is the same, so a linear drift biases none of them."""
    one = list(names) + list(reversed(names))
    return one * rounds


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile), linear interpolation between order statistics;
    ValueError for no values."""
    if not values:
        raise ValueError("quartiles of no values")
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval for the median: order statistics x(k) and x(n+1-k) with the
    largest k such that P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2. With too few values for
    that confidence (fewer than 6 at 95%) it is the whole range, (min, max)."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("median_ci of no values")
    tail, k, below = (1 - confidence) / 2, 0, 0.0
    while k < n // 2:
        below += math.comb(n, k) / 2**n  # P(Binomial(n, 1/2) <= k) after adding
        if below > tail:
            break
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def kernel_stats(seconds: Sequence[float], confidence: float = 0.95,
                 predicted_s: float | None = None) -> KernelStats:
    """Median, quartiles, range and the median's interval of one kernel's timed calls."""
    q1, med, q3 = quartiles(seconds)
    return KernelStats(len(seconds), med, q1, q3, q3 - q1, min(seconds), max(seconds),
                       median_ci(seconds, confidence), predicted_s)


def _arrays(tree) -> list:
    """The mx.arrays in a tree of lists, tuples and dicts (scalars and the rest left out)."""
    import mlx.core as mx  # lazy: runners.get() imports mlx_metal, which imports this module

    if isinstance(tree, mx.array):
        return [tree]
    if isinstance(tree, dict):
        tree = list(tree.values())
    if isinstance(tree, (list, tuple)):
        return [a for item in tree for a in _arrays(item)]
    return []


def timed_call(kernel: Kernel, inputs, clock: Callable[[], int] = time.perf_counter_ns) -> int:
    """Nanoseconds of one call: the inputs are evaluated and the device idle before the clock
    starts; the clock stops after the outputs are evaluated and the device has synchronised,
    so every kernel's GPU work, and nothing queued before it, is inside the timed region."""
    import mlx.core as mx  # lazy: as in _arrays

    mx.eval(_arrays(inputs))
    mx.synchronize()
    start = clock()
    mx.eval(_arrays(kernel(inputs)))
    mx.synchronize()
    return clock() - start


def platform_versions() -> dict:
    """Where a timing was taken: macOS (``platform.mac_ver``; "" off a Mac), machine, MLX
    version, MLX's default device and its name and architecture (``mx.device_info``: the GPU's
    name and applegpu_gNN family on a Mac). MLX exposes no Metal language version; the macOS
    version fixes which Metal the system has."""
    import mlx.core as mx  # lazy: as in _arrays

    info_of = getattr(mx, "device_info", None) or mx.metal.device_info
    try:
        info = dict(info_of())
    except RuntimeError:
        info = {}
    return {"macos": platform.mac_ver()[0], "machine": platform.machine(),
            "system": platform.platform(), "python": platform.python_version(),
            "mlx": mx.__version__, "device": str(mx.default_device()),
            "device_name": str(info.get("device_name", "")),
            "architecture": str(info.get("architecture", "")),
            "metal_available": bool(mx.metal.is_available())}


def warm_up(kernels: dict[str, Kernel], make_inputs: Callable[[], Any], *, min_s: float,
            max_s: float, window: int = 5, tolerance: float = 0.05,
            clock: Callable[[], int] = time.perf_counter_ns) -> dict:
    """Untimed-for-the-result calls, in ABBA rounds, until at least ``min_s`` has passed and
    every kernel's time per call is stable (the median of its last ``window`` calls within
    ``tolerance`` of the median of the ``window`` before), or until ``max_s`` has passed.
    Returns {"seconds", "calls", "stable"}."""
    names, recent = list(kernels), {n: [] for n in kernels}
    start, calls = clock(), 0
    while True:
        for name in abba_schedule(names, 1):
            recent[name].append(timed_call(kernels[name], make_inputs(), clock))
            calls += 1
        elapsed = (clock() - start) / 1e9
        stable = all(len(r) >= 2 * window and abs(
            statistics.median(r[-window:]) - statistics.median(r[-2 * window:-window]))
            <= tolerance * statistics.median(r[-window:]) for r in recent.values())
        if (elapsed >= min_s and stable) or elapsed >= max_s:
            return {"seconds": elapsed, "calls": calls, "stable": stable}


def time_paired(candidate: Kernel, baselines: dict[str, Kernel], make_inputs: Callable[[], Any],
                *, held_out: Sequence[HeldOutCheck], warmup_s: float = 0.5,
                max_warmup_s: float = 5.0, min_runs: int = 20, max_runs: int = 2000,
                max_s: float = 10.0, precision: float = 0.02, confidence: float = 0.95,
                predicted_s: dict[str, float] | None = None, name: str = "candidate",
                clock: Callable[[], int] = time.perf_counter_ns) -> PairedTiming:
    """Time ``candidate`` against each of ``baselines`` on MLX's default device, paired.

    Every check of ``held_out`` runs first; the first that fails refuses the candidate (a
    record with ``refused`` set and nothing timed). Then warm-up (``warm_up``: at least
    ``warmup_s``, at most ``max_warmup_s``), then ABBA rounds, each call on fresh
    ``make_inputs()``, until every kernel has ``min_runs`` runs and each speedup's interval
    lies within ±``precision`` of its median, or ``max_s`` has passed (never before
    FEWEST_ROUNDS rounds), or ``max_runs`` runs. ``predicted_s`` (by kernel name: ``name``
    for the candidate, else the baseline's) is carried beside each measurement. Returns a
    PairedTiming; raises ValueError for no held-out checks, a baseline named ``name`` or a
    nonsensical option, and whatever a kernel raises.
    """
    if not held_out:
        raise ValueError("time_paired needs correctness checks at held-out shapes (held_out): "
                         "a kernel is timed only after it is shown correct beyond its own sizes")
    if name in baselines:
        raise ValueError(f"a baseline is named {name!r}, the candidate's name; rename it")
    if min_runs < 2 or max_runs < min_runs or max_s <= 0 or not 0 < confidence < 1:
        raise ValueError(f"time_paired needs 2 <= min_runs <= max_runs, max_s > 0 and "
                         f"0 < confidence < 1; got {min_runs}, {max_runs}, {max_s}, {confidence}")
    out = PairedTiming(checks=[], confidence=confidence, versions=platform_versions())
    for check in held_out:
        why = check.run()
        out.checks.append({"label": check.label, "ok": not why, "why": why})
        if why:
            out.refused = f"incorrect at {check.label}: {why}"
            return out
    kernels = {name: candidate, **baselines}
    out.warmup = warm_up(kernels, make_inputs, min_s=warmup_s, max_s=max_warmup_s, clock=clock)
    runs: dict[str, list[float]] = {n: [] for n in kernels}
    rounds: list[dict[str, float]] = []  # each kernel's mean seconds in one round
    start = clock()
    while True:
        this: dict[str, list[float]] = {n: [] for n in kernels}
        for kernel in abba_schedule(list(kernels), 1):
            seconds = timed_call(kernels[kernel], make_inputs(), clock) / 1e9
            runs[kernel].append(seconds)
            this[kernel].append(seconds)
            out.schedule.append(kernel)
        rounds.append({n: statistics.fmean(v) for n, v in this.items()})
        out.speedups = {b: _speedup(b, [r[b] / r[name] for r in rounds], confidence)
                        for b in baselines}
        done, count = len(rounds) >= FEWEST_ROUNDS, len(runs[name])
        if count >= max_runs:
            out.stopped = f"{max_runs} runs (max_runs)"
        elif done and count >= min_runs and all(
                s.ci[1] - s.median <= precision * s.median and s.median - s.ci[0]
                <= precision * s.median for s in out.speedups.values()):
            out.stopped = f"precise: every speedup's interval within ±{precision:.0%}"
        elif done and (clock() - start) / 1e9 >= max_s:
            out.stopped = f"{max_s:g} s passed (max_s)"
        if out.stopped:
            break
    predicted = predicted_s or {}
    out.kernels = {n: kernel_stats(v, confidence, predicted.get(n)) for n, v in runs.items()}
    out.samples_s = runs
    return out


def _speedup(baseline: str, ratios: list[float], confidence: float) -> Speedup:
    return Speedup(baseline, statistics.median(ratios), median_ci(ratios, confidence),
                   len(ratios))


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} us"


def format_timing(result: PairedTiming) -> list[str]:
    """Report lines: versions, the gate, then each kernel's median, quartiles and runs with the
    cost model's prediction beside it ("no prediction" where there is none), then speedups."""
    v = result.versions
    lines = [f"timed on {v.get('device_name') or v.get('device')} "
             f"({v.get('architecture') or v.get('machine')}), macOS {v.get('macos') or 'n/a'}, "
             f"MLX {v.get('mlx')}"]
    lines += [f"correct at {c['label']}" if c["ok"] else f"INCORRECT at {c['label']}: {c['why']}"
              for c in result.checks]
    if result.refused:
        return lines + [f"not timed: {result.refused}"]
    lines.append(f"warm-up {result.warmup['calls']} calls in {result.warmup['seconds']:.2f} s "
                 f"({'stable' if result.warmup['stable'] else 'not stable: warm-up cap'}); "
                 f"stopped: {result.stopped}")
    for n, s in result.kernels.items():
        predicted = ("no prediction" if s.predicted_s is None else
                     f"predicted {_us(s.predicted_s)} ({s.predicted_s / s.median_s:.2f}x of "
                     "measured)")
        lines.append(f"{n}: median {_us(s.median_s)} (IQR {_us(s.q1_s)} to {_us(s.q3_s)}, "
                     f"{s.runs} runs) | {predicted}")
    lines += [f"speedup vs {s.baseline}: {s.median:.3f}x ({result.confidence:.0%} CI "
              f"{s.ci[0]:.3f} to {s.ci[1]:.3f}, {s.rounds} paired rounds)"
              for s in result.speedups.values()]
    return lines
