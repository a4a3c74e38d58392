"""Scoring a Metal candidate: its predicted time on a named chip (docs/perf-model.md,
"Scoring a Metal candidate"). One counting launch in metal_sim (runners/perf_metal.py), then
the cost model with the chip's parameters (kb/rules/arch/perf_chips.toml). Apple-GPU
predictions are unvalidated until measured on a Mac.
"""

from __future__ import annotations

import numpy as np

from kb.perf_chips import perf_chip
from runners.perf_metal import NotScored, count_metal, count_metal_function, predict_counted
from runners.perf_model import Prediction

__all__ = ["NotScored", "score_metal", "score_metal_function"]


def score_metal(source: str, header: str, input_names, output_names,
                inputs: list[np.ndarray], output_shapes, output_dtypes, grid, threadgroup,
                template=None, chip: str = "M2", *, atomic_outputs: bool = False,
                init_value=None, name: str = "candidate") -> Prediction:
    """Predicted time of one launch of an MLX metal_kernel candidate on ``chip`` (arguments as
    ``mx.fast.metal_kernel(...)`` and its call take them; ``grid`` in threads). Returns a
    Prediction (``predicted_s``, ``bottleneck``, ``terms_s``, ``counters``...). Raises
    NotScored when the candidate does not compile or faults, kb.arch.ArchError for an unknown
    chip."""
    params = perf_chip(chip)
    run, launch = count_metal(source, header, input_names, output_names, inputs,
                              output_shapes, output_dtypes, grid, threadgroup, template,
                              atomic_outputs=atomic_outputs, init_value=init_value, name=name)
    return predict_counted(run, launch, params, header + "\n" + source, f"metal_kernel {name}")


def score_metal_function(text: str, kernel: str, buffers: dict[int, object], *,
                         filename: str = "kernel.metal", grid=None, threadgroup=(1, 1, 1),
                         threadgroups=None, threadgroup_memory: int = 0,
                         chip: str = "M2") -> Prediction:
    """Predicted time of one launch of kernel ``kernel`` of a standalone .metal text on
    ``chip`` (buffers and launch as ``MetalFunction.launch`` takes them). Raises as
    ``score_metal``; ValueError for a kernel the text does not define."""
    params = perf_chip(chip)
    run, launch = count_metal_function(text, kernel, buffers, filename=filename, grid=grid,
                                       threadgroup=threadgroup, threadgroups=threadgroups,
                                       threadgroup_memory=threadgroup_memory)
    return predict_counted(run, launch, params, text, f"kernel {kernel}")
