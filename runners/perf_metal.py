"""Counting launches of Metal kernels for the cost model: one checked launch in metal_sim with
counting on, and the Launch the model needs (runners/perf_model.py).

``count_metal`` takes what ``mx.fast.metal_kernel`` and its call take (an MLX kernel body);
``count_metal_function`` a kernel of a standalone .metal file. agent/perf_metal.py turns
their records into predictions for a named chip (``score_metal``).
"""

from __future__ import annotations

import math

import numpy as np

from runners.metal_sim import MetalLibrary, metal_kernel
from runners.metal_sim.library import Param
from runners.perf_model import ChipParams, Launch, Prediction, arithmetic_estimate, predict
from runners.simhost import SimRecord, launch_dims


class NotScored(ValueError):
    """The candidate did not compile or faulted in metal_sim; ``run`` holds the record."""

    def __init__(self, what: str, run: SimRecord):
        why = "; ".join(map(str, run.diagnostics or run.findings))[:300] or "no counters"
        super().__init__(f"{what} did not run in metal_sim: {why}")
        self.run = run


def metal_launch(grid, threadgroup, *, grid_in_threads: bool = True) -> Launch:
    """The Launch of a Metal dispatch: ``grid`` counts threads (MLX, dispatchThreads; edge
    groups are partial) or, with ``grid_in_threads=False``, threadgroups."""
    grid, tg = launch_dims(grid, "grid"), launch_dims(threadgroup, "threadgroup")
    if grid_in_threads:
        tg = tuple(min(t, g) for t, g in zip(tg, grid, strict=True))
        groups = [-(-g // t) for g, t in zip(grid, tg, strict=True)]
    else:
        groups = grid
    return Launch(groups=math.prod(groups), threads_per_group=math.prod(tg))


def predict_counted(run: SimRecord, launch: Launch, chip: ChipParams, code: str,
                    what: str) -> Prediction:
    """The prediction for a counting run's record on ``chip``, its counters kept; NotScored
    when it did not run cleanly. ``code`` is what the arithmetic estimate reads when the
    counters carry no counted operations."""
    if not run.compiled or run.findings or not run.counters:
        raise NotScored(what, run)
    pred = predict(run.counters, launch, chip, arithmetic_estimate(code))
    pred.counters = run.counters
    return pred


def count_metal(source: str, header: str, input_names, output_names,
                inputs: list[np.ndarray], output_shapes, output_dtypes, grid, threadgroup,
                template=None, *, atomic_outputs: bool = False, init_value=None,
                name: str = "candidate") -> tuple[SimRecord, Launch]:
    """(the counting run's record, its Launch) of an MLX metal_kernel candidate; ``grid`` in
    threads as MLX takes it."""
    kernel = metal_kernel(name, list(input_names), list(output_names), source, header,
                          atomic_outputs=atomic_outputs)
    grid, threadgroup = launch_dims(grid, "grid"), launch_dims(threadgroup, "threadgroup")
    run = kernel.launch(inputs=list(inputs), output_shapes=output_shapes,
                        output_dtypes=output_dtypes, grid=grid, threadgroup=threadgroup,
                        template=template, init_value=init_value, count=True)
    return run, metal_launch(grid, threadgroup)


def kernel_params(text: str, kernel: str, filename: str = "kernel.metal") -> list[Param]:
    """The parameters of kernel ``kernel`` of a standalone .metal text; ValueError naming what
    cannot be read."""
    return MetalLibrary(text, filename).function(kernel).params


def count_metal_function(text: str, kernel: str, buffers: dict[int, object], *,
                         filename: str = "kernel.metal", grid=None, threadgroup=(1, 1, 1),
                         threadgroups=None, threadgroup_memory: int = 0
                         ) -> tuple[SimRecord, Launch]:
    """(the counting run's record, its Launch) of kernel ``kernel`` of a standalone .metal
    text (arguments as ``MetalFunction.launch`` takes them)."""
    function = MetalLibrary(text, filename).function(kernel)
    run = function.launch(buffers, grid=grid, threadgroup=threadgroup,
                          threadgroups=threadgroups, threadgroup_memory=threadgroup_memory,
                          count=True)
    dims = grid if threadgroups is None else threadgroups
    return run, metal_launch(dims, threadgroup, grid_in_threads=threadgroups is None)
