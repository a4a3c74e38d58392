"""benchmark: how fast a correct candidate is. On Apple Silicon, real MLX timings against the
case's expert port as baseline; elsewhere, simulator-side metrics (launch shape, threadgroup
memory, a roofline bound) and the performance lints, with a plain statement that no Apple GPU
timing exists. Candidates are scored by time where there is one, else by lints (lower wins).
"""

from __future__ import annotations

import math

import numpy as np

import runners
from corpus.candidate import Candidate
from corpus.cases import evaluate
from corpus.check import make_inputs
from kb.arch import ArchError, roofline_seconds
from kb.arch import chip as chip_named
from kb.lints import lint_metal
from kb.tgmem import threadgroup_decls
from runners.dtypes import DTYPES, Tensor, to_mx
from runners.errors import KportError

NO_GPU = ("No Apple GPU timing exists: this machine has no Metal (mx.metal.is_available() is "
          "False). Scores are simulator metrics and performance lints, not measurements; run "
          "`kport port` (or the package's kernel.py) on Apple Silicon for timings.")


def launch_values(candidate: Candidate, sizes: dict[str, int]) -> tuple[tuple, tuple, dict]:
    """(grid, threadgroup, template) of a candidate evaluated at ``sizes``; template strings
    that name a dtype stay names. Raises CaseError for an expression it cannot evaluate."""
    def dims(exprs) -> tuple:
        vals = [int(evaluate(e, sizes, "launch")) for e in exprs]
        return tuple((vals + [1, 1, 1])[:3])

    template = {k: v if not isinstance(v, str) or v in DTYPES else int(evaluate(v, sizes))
                for k, v in candidate.template.items()}
    return dims(candidate.grid), dims(candidate.threadgroup), template


def perf_lints(candidate: Candidate, sizes: dict[str, int], chip: str) -> list[dict]:
    """kb.lints findings for the candidate at ``sizes`` on ``chip``, as dicts."""
    try:
        _, tg, template = launch_values(candidate, sizes)
    except KportError:
        tg, template = None, {}
    return [{"id": x.id, "severity": x.severity, "message": x.message, "line": x.line,
             "file": x.file, "sources": x.sources}
            for x in lint_metal(candidate.body, candidate.header,
                                threadgroup=tg, template=template, chip=chip)]


def lint_score(lints: list[dict]) -> float:
    """10 per error, 1 per warning, 0.1 per info: lower is better."""
    weight = {"error": 10.0, "warning": 1.0, "info": 0.1}
    return round(sum(weight[x["severity"]] for x in lints), 3)


def sim_metrics(candidate: Candidate, case, sizes: dict[str, int], chip: str) -> dict:
    """Launch shape, static threadgroup memory and a memory-traffic roofline bound at
    ``sizes`` (every array read or written once; flops not counted)."""
    grid, tg, template = launch_values(candidate, sizes)
    decls = threadgroup_decls(candidate.body, template)
    moved = 0
    for a in case.args:
        if a.role == "scalar":
            continue
        n = math.prod(int(evaluate(s, sizes)) for s in a.shape)
        moved += n * np.dtype(DTYPES[a.dtype][0]).itemsize * (2 if a.role == "inout" else 1)
    out = {"sizes": dict(sizes), "grid_threads": list(grid), "threadgroup": list(tg),
           "threadgroups": math.prod(-(-g // t) for g, t in zip(grid, tg, strict=True)),
           "threadgroup_memory_bytes": sum(d.nbytes or 0 for d in decls),
           "bytes_moved": moved}
    try:
        out["roofline_lower_bound_s"] = roofline_seconds(chip_named(chip), moved, 0.0)
        out["roofline_chip"] = chip
    except ArchError as err:
        out["roofline_note"] = str(err)
    return out


def _apple_timing(candidate: Candidate, case, sizes: dict[str, int]) -> dict | None:
    """Median seconds of the candidate and of the case's expert port on this Mac; None
    without Metal. Unconfirmed: written against runners.mlx_metal, not run on a Mac here."""
    mlx_metal = runners.get("mlx_metal")
    if not mlx_metal.available():
        return None
    # lazy: MLX is heavy (Metal on macOS); only a Mac with Metal times a kernel
    import mlx.core as mx

    by_name = {a.name: a for a in case.args}
    values = make_inputs(case, sizes, 0)

    def timed(port: Candidate) -> float:
        grid, tg, template = launch_values(port, sizes)
        outs = [by_name[o] if o in by_name else by_name[o.removesuffix("_out")]
                for o in port.outputs]
        k = mlx_metal.kernel("kport_bench", [port.names.get(n, n) for n in port.inputs],
                             [port.names.get(n, n) for n in port.outputs], port.body,
                             port.header, atomic_outputs=port.atomic_outputs)
        make = lambda: [to_mx(Tensor(np.asarray(values[n]), by_name[n].dtype))  # noqa: E731
                        for n in port.inputs]
        stats = k.benchmark(
            make, grid=grid, threadgroup=tg,
            output_shapes=[tuple(int(evaluate(s, sizes)) for s in a.shape) for a in outs],
            output_dtypes=[getattr(mx, a.dtype) for a in outs],
            template=[(n, getattr(mx, v) if isinstance(v, str) else v)
                      for n, v in template.items()] or None,
            init_value=port.init_value)
        return stats.median_s

    out = {"median_s": timed(candidate), "sizes": dict(sizes)}
    if case.metal is not None:
        expert = Candidate.from_case(case)
        out["baseline"] = {"what": f"the expert port of {case.id}", "median_s": timed(expert)}
        out["speedup"] = out["baseline"]["median_s"] / out["median_s"]
    return out


def measure(candidate: Candidate, case, chip: str) -> dict:
    """Benchmark record of a correct candidate at the case's default sizes: lints, metrics,
    timing (None off a Mac), note and score ``{"kind": "time"|"lints", "value"}``."""
    sizes = dict(case.sizes)
    lints = perf_lints(candidate, sizes, chip)
    bench = {"lints": lints, "metrics": sim_metrics(candidate, case, sizes, chip),
             "timing": _apple_timing(candidate, case, sizes)}
    if bench["timing"] is None:
        bench["note"] = NO_GPU
        bench["score"] = {"kind": "lints", "value": lint_score(lints)}
    else:
        bench["note"] = "Apple GPU timings from mlx_metal at the case's default sizes."
        bench["score"] = {"kind": "time", "value": bench["timing"]["median_s"]}
    return bench


def benchmark(state, runtime) -> dict:
    """Measure the candidate just checked when it is correct; returns ``{"bench": ...}``
    ({} for an incorrect one)."""
    if not state.get("check", {}).get("ok"):
        return {"bench": {}}
    ctx = runtime.context
    return {"bench": measure(Candidate.model_validate(state["candidate"]), ctx.case, ctx.chip)}
