"""benchmark: how fast a correct candidate is. On Apple Silicon, real MLX timings against the
case's expert port as baseline; elsewhere, the cost model's prediction (one counting run in
metal_sim, agent/perf_metal.py, with the chip's parameters: unvalidated for Apple GPUs),
simulator-side metrics (launch shape, threadgroup memory, a roofline bound) and the
performance lints, with a plain statement that no Apple GPU timing exists. Candidates are
scored by time where there is one, else by predicted time, else by lints (lower wins).
"""

from __future__ import annotations

import math

import numpy as np

import runners
from agent.perf_metal import NotScored, score_metal
from corpus.candidate import Candidate
from corpus.cases import evaluate
from corpus.check import make_inputs
from kb.arch import ArchError, roofline_seconds
from kb.arch import chip as chip_named
from kb.lints import lint_metal
from kb.tgmem import threadgroup_decls
from runners.dtypes import DTYPES, Tensor, mx_dtype, to_mx
from runners.errors import KportError

NO_METAL = ("No Apple GPU timing exists: this machine has no Metal (mx.metal.is_available() "
            "is False). ")
FOR_TIMINGS = ("run `kport port` (or the package's kernel.py) on Apple Silicon for timings.")
NO_GPU = (NO_METAL + "Scores are simulator metrics and performance lints, not measurements; "
          + FOR_TIMINGS)
MODEL_NOTE = (NO_METAL + "Scores are the cost model's predicted times (a counting run in "
              "metal_sim with {chip}'s parameters, docs/perf-model.md), not measurements: the "
              "model is validated on an NVIDIA H200 only, its Apple-GPU predictions are "
              "unvalidated until measured on a Mac; " + FOR_TIMINGS)


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


def _arrays(candidate: Candidate, case, sizes: dict[str, int]) -> dict:
    """The metal_kernel call's inputs (seed 0; a 1-D input under 8 elements padded to 8, as
    run() pads it), output shapes and dtypes, and template of ``candidate`` at ``sizes``."""
    by_name = {a.name: a for a in case.args}
    values = make_inputs(case, sizes, 0)
    tensors = []
    for n in candidate.inputs:
        value, arg = np.asarray(values[n]), by_name[n]
        if arg.role != "scalar" and value.ndim == 1 and value.size < 8:
            value = np.concatenate([value, np.zeros(8 - value.size, value.dtype)])
        tensors.append(to_mx(Tensor(value, arg.dtype)))
    outs = [by_name[o] if o in by_name else by_name[o.removesuffix("_out")]
            for o in candidate.outputs]
    _, _, template = launch_values(candidate, sizes)
    return {"inputs": tensors,
            "output_shapes": [tuple(int(evaluate(s, sizes)) for s in a.shape) for a in outs],
            "output_dtypes": [mx_dtype(a.dtype) for a in outs],
            "template": [(n, mx_dtype(v) if isinstance(v, str) else v)
                         for n, v in template.items()] or None}


def model_prediction(candidate: Candidate, case, sizes: dict[str, int], chip: str) -> dict:
    """The cost model's prediction for one launch of ``candidate`` at ``sizes`` on ``chip``:
    ``predicted_s``, ``bottleneck``, ``terms_s``, ``chip``, ``sizes``; ``{"error": why}``
    when it cannot be scored (it did not run cleanly with counting, an unknown chip)."""
    grid, tg, _ = launch_values(candidate, sizes)
    arrays = _arrays(candidate, case, sizes)
    try:
        pred = score_metal(candidate.body, candidate.header,
                           [candidate.names.get(n, n) for n in candidate.inputs],
                           [candidate.names.get(n, n) for n in candidate.outputs],
                           arrays["inputs"], arrays["output_shapes"], arrays["output_dtypes"],
                           grid, tg, arrays["template"], chip,
                           atomic_outputs=candidate.atomic_outputs,
                           init_value=candidate.init_value, name="kport_score")
    except (NotScored, KportError) as err:
        return {"error": str(err)[:300]}
    return {"predicted_s": pred.predicted_s, "bottleneck": pred.bottleneck,
            "terms_s": dict(pred.terms_s), "chip": chip, "sizes": dict(sizes)}


def _apple_timing(candidate: Candidate, case, sizes: dict[str, int],
                  predicted_s: float | None = None) -> dict | None:
    """The candidate timed on this Mac against the expert port and MLX's own ops, after a
    correctness gate at held-out sizes (agent/mac_timing.time_case, with ``predicted_s``, the
    cost model's prediction, printed beside); None without Metal. Unconfirmed on a Mac."""
    if not runners.get("mlx_metal").available():
        return None
    # lazy: only a Mac times a kernel, and agent.mac_timing imports launch_values from here
    from agent.mac_timing import time_case

    return time_case(candidate, case, sizes, predicted_s=predicted_s)


def measure(candidate: Candidate, case, chip: str) -> dict:
    """Benchmark record of a correct candidate at the case's default sizes: lints, metrics,
    timing (None off a Mac), the model's prediction, note and score ``{"kind": "time" |
    "model" | "lints", "value"}`` (seconds measured, seconds predicted, lint weight)."""
    sizes = dict(case.sizes)
    lints = perf_lints(candidate, sizes, chip)
    model = model_prediction(candidate, case, sizes, chip)
    bench = {"lints": lints, "metrics": sim_metrics(candidate, case, sizes, chip),
             "timing": _apple_timing(candidate, case, sizes, model.get("predicted_s")),
             "model": model}
    if bench["timing"] is not None and bench["timing"]["median_s"] is None:
        bench["note"] = f"Not timed on this Mac: {bench['timing']['refused']}"
        bench["score"] = {"kind": "lints", "value": lint_score(lints)}
    elif bench["timing"] is None and "predicted_s" in bench["model"]:
        bench["note"] = MODEL_NOTE.format(chip=chip)
        bench["score"] = {"kind": "model", "value": bench["model"]["predicted_s"]}
    elif bench["timing"] is None:
        bench["note"] = NO_GPU
        bench["score"] = {"kind": "lints", "value": lint_score(lints)}
    else:
        bench["note"] = ("Apple GPU timings from mlx_metal at the case's default sizes, paired "
                         "with the baselines: " + "; ".join(bench["timing"]["lines"]))
        bench["score"] = {"kind": "time", "value": bench["timing"]["median_s"]}
    return bench


def benchmark(state, runtime) -> dict:
    """Measure the candidate just checked when it is correct; returns ``{"bench": ...}``
    ({} for an incorrect one)."""
    if not state.get("check", {}).get("ok"):
        return {"bench": {}}
    ctx = runtime.context
    return {"bench": measure(Candidate.model_validate(state["candidate"]), ctx.case, ctx.chip)}
