"""mac_timing: time a correct candidate of a corpus case on this Mac's GPU, fairly.

The candidate must first be correct, on the real GPU, at the timed sizes and at held-out sizes
(``gate_size_sets``); then it is timed paired and alternating (runners/timing.py) against the
case's expert port and MLX's own ops for the same work (corpus/mlx_baselines.py), each
where the case has one. docs/perf-model.md, "Timing on a Mac", states the rules.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

import numpy as np

import runners
from agent.nodes.bench import launch_values
from corpus.candidate import Candidate
from corpus.cases import CaseError, CaseSpec, evaluate, holds
from corpus.check import compare, make_inputs, run_cuda, run_reference
from corpus.mlx_baselines import mlx_baseline
from runners.dtypes import Tensor, mx_dtype, to_mx
from runners.timing import HeldOutCheck, format_timing, time_paired

SMALLEST_DEVICE_ARRAY = 8  # MLX passes a shorter 1-D input as `constant`; ports take `device`


def stretched_sizes(case: CaseSpec) -> dict[str, int] | None:
    """The default sizes with every size the case's size sets vary made 2 x default + 1 (odd,
    past the largest listed value when that is the default, a multiple of no threadgroup
    width); None when no size varies or the result breaks the case's constraints or limits."""
    sets = case.size_sets()
    varying = [k for k in case.sizes if len({s[k] for s in sets}) > 1]
    if not varying:
        return None
    draw = {**case.sizes, **{k: 2 * case.sizes[k] + 1 for k in varying}}
    try:
        case.check_sizes(draw)
        if all(holds(c, draw, "check.constraints") for c in case.check.constraints):
            return draw
    except CaseError:
        pass
    return None


def gate_size_sets(case: CaseSpec, sizes: dict[str, int],
                   rng: random.Random) -> list[tuple[str, dict[str, int]]]:
    """(label, sizes) where a candidate must be correct before it is timed: the timed sizes,
    the stretched sizes and one held-out draw (CaseSpec.held_out_sizes), each where it exists
    and differs from those before it."""
    out = [("the timed sizes", dict(sizes))]
    for what, extra in (("stretched sizes", stretched_sizes(case)),
                        ("held-out sizes", case.held_out_sizes(rng))):
        if extra is not None and all(extra != s for _, s in out):
            out.append((what, extra))
    return [(f"{what} {s}", s) for what, s in out]


def _oracle(case: CaseSpec, sizes: dict, inputs: dict) -> dict:
    if case.check.reference == "cuda":
        outs, record = run_cuda(case, sizes, inputs)
        if not record.ok:
            raise CaseError(f"{case.folder / 'case.toml'}: the CUDA oracle failed at {sizes}")
        return outs
    return run_reference(case, sizes, inputs)


def mx_inputs(case: CaseSpec, values: dict) -> dict:
    """Every argument's value as an mx.array of its dtype, by argument name; a 1-D array
    shorter than 8 padded to 8, as the package's run() pads it."""
    out = {}
    for arg in case.args:
        value = np.asarray(values[arg.name])
        if arg.role != "scalar" and value.ndim == 1 and value.size < SMALLEST_DEVICE_ARRAY:
            value = np.concatenate([value, np.zeros(SMALLEST_DEVICE_ARRAY - value.size,
                                                    value.dtype)])
        out[arg.name] = to_mx(Tensor(value, arg.dtype))
    return out


def port_kernel(port: Candidate, case: CaseSpec, sizes: dict[str, int]) -> Callable[[dict], dict]:
    """The port on this Mac's GPU at ``sizes``: inputs by argument name -> outputs by argument
    name (lazy mx.arrays). MLX's errors raise when the outputs are evaluated."""
    by_name = {a.name: a for a in case.args}
    outs = [by_name[o] if o in by_name else by_name[o.removesuffix("_out")]
            for o in port.outputs]
    grid, tg, template = launch_values(port, sizes)
    # MLX caches a built kernel by its name: two sources under one name would share one build
    digest = hashlib.sha256((port.header + "\0" + port.body).encode()).hexdigest()[:12]
    kernel = runners.get("mlx_metal").kernel(
        f"kport_bench_{digest}", [port.names.get(n, n) for n in port.inputs],
        [port.names.get(n, n) for n in port.outputs], port.body, port.header,
        atomic_outputs=port.atomic_outputs)
    launch = dict(grid=grid, threadgroup=tg, init_value=port.init_value,
                  output_shapes=[tuple(int(evaluate(s, sizes)) for s in a.shape) for a in outs],
                  output_dtypes=[mx_dtype(a.dtype) for a in outs],
                  template=[(n, mx_dtype(v) if isinstance(v, str) else v)
                            for n, v in template.items()] or None)

    def run(values: dict) -> dict:
        got = kernel(inputs=[values[n] for n in port.inputs], **launch)
        return {a.name: g for a, g in zip(outs, got, strict=True)}
    return run


def mlx_kernel(case: CaseSpec, sizes: dict[str, int]) -> tuple[str, Callable] | None:
    """(what it is, inputs by argument name -> outputs) of the case's MLX baseline at
    ``sizes`` (corpus/mlx_baselines.py), taking mx_inputs' padded arrays; None without one."""
    values = make_inputs(case, sizes, 0)
    scalars = {a.name: values[a.name].item() for a in case.args if a.role == "scalar"}
    found = mlx_baseline(case.id, scalars)
    if found is None:
        return None
    lengths = {a.name: values[a.name].size for a in case.args
               if a.role != "scalar" and np.ndim(values[a.name]) == 1}
    what, fn = found
    # a view of each padded 1-D input at its own length: no copy inside the timed call
    return what, lambda v: fn({n: x[:lengths[n]] if n in lengths else x for n, x in v.items()})


def _numpy(case: CaseSpec, outputs: dict) -> dict:
    import mlx.core as mx  # lazy: MLX is heavy (Metal on macOS); only a Mac times a kernel

    by_name = {a.name: a for a in case.args}
    return {n: np.array(v.view(mx.uint16)) if by_name[n].dtype == "bfloat16" else np.array(v)
            for n, v in outputs.items()}


def correct_at(case: CaseSpec, build: Callable[[dict], Callable[[dict], dict]],
               sizes: dict[str, int], seed: int) -> str:
    """"" when ``build(sizes)`` computes the oracle's outputs at ``sizes`` (one seed), else why
    not: the first mismatch, or MLX's error for a kernel that does not build or run."""
    import mlx.core as mx  # lazy: as in _numpy

    values = make_inputs(case, sizes, seed)
    want = _oracle(case, sizes, values)
    try:
        got = build(sizes)(mx_inputs(case, values))
        mx.eval(list(got.values()))
    except (RuntimeError, ValueError) as err:
        return f"MLX: {err}"
    ok, _, why = compare(case, want, _numpy(case, got))
    return "" if ok else why


def time_case(candidate: Candidate, case: CaseSpec, sizes: dict[str, int], *,
              predicted_s: float | dict[str, float] | None = None, **options) -> dict | None:
    """The candidate timed on this Mac's GPU at ``sizes`` against the case's expert port and
    MLX baseline (each where there is one): runners.timing.PairedTiming as a dict, with
    "lines" (format_timing), "median_s" (None when refused) and "speedup" over the expert
    port. ``predicted_s``: the cost model's prediction for the candidate, or by kernel name
    ("candidate", "expert", "mlx"), printed beside the measurements. None without Metal;
    ``options`` go to time_paired."""
    if not runners.get("mlx_metal").available():
        return None
    import mlx.core as mx  # lazy: as in _numpy

    draws = random.SystemRandom()  # held-out sizes and seeds nothing can predict
    checks = [HeldOutCheck(label, lambda s=s: correct_at(
        case, lambda at: port_kernel(candidate, case, at), s, draws.randrange(1 << 30)))
        for label, s in gate_size_sets(case, sizes, draws)]
    baselines, what = {}, {}
    if case.metal is not None:
        baselines["expert"] = port_kernel(Candidate.from_case(case), case, sizes)
        what["expert"] = f"the expert port of {case.id}"
    if (found := mlx_kernel(case, sizes)) is not None:
        what["mlx"], baselines["mlx"] = found
    seeds = iter(range(draws.randrange(1 << 30), 1 << 31))  # fresh inputs for every call
    predicted = predicted_s if isinstance(predicted_s, dict) or predicted_s is None else {
        "candidate": predicted_s}
    with mx.stream(mx.gpu):
        result = time_paired(port_kernel(candidate, case, sizes), baselines,
                             lambda: mx_inputs(case, make_inputs(case, sizes, next(seeds))),
                             held_out=checks, predicted_s=predicted, **options)
    out = result.to_dict() | {"sizes": dict(sizes), "baselines": what,
                              "lines": format_timing(result)}
    out["median_s"] = None if result.refused else result.kernels["candidate"].median_s
    if "expert" in result.speedups:
        out["speedup"] = result.speedups["expert"].median
    return out
