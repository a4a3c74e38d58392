"""mlx_metal: run `metal_kernel` bodies on a real Apple GPU through MLX, with metal_sim's surface.

``metal_kernel(...)`` returns an object that is called exactly like the one
``mx.fast.metal_kernel`` returns (it delegates), and whose ``.launch(...)`` returns an MlxRun
record for harnesses: a kernel MLX cannot build is ``compiled=False`` with MLX's error text as
its diagnostic, not an exception. ``benchmark`` times a kernel on fresh inputs;
``time_paired`` times a candidate against baselines, paired and alternating, after a
correctness gate at held-out shapes (runners/timing.py; docs/perf-model.md, "Timing on a Mac").

Importing this module works on any machine; MLX's Metal back-end is only touched when a kernel
runs, and ``available()`` says whether this machine can run one (Apple Silicon with Metal): it
is kport's one answer to "is there an Apple GPU here", asked as
``runners.get("mlx_metal").available()`` outside runners/.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable

import numpy as np

from runners.base import LaunchRecord, Runner, Timing
from runners.dtypes import DTYPES, Tensor, dtype_name, to_tensor
from runners.metal_sim import codegen
from runners.simbuild import Diagnostic
from runners.timing import PairedTiming
from runners.timing import time_paired as _time_paired

NEEDS_METAL = ("mlx_metal needs Apple Silicon with Metal (mx.metal.is_available() is False "
               "here); run kernels in runners.metal_sim on this machine instead")
# MLX raises these, at evaluation time, when the Metal compiler or pipeline rejects a kernel.
_BUILD_ERRORS = ("Unable to build metal library", "Unable to load function",
                 "Unable to load kernel", "Unable to build compute pipeline")


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """True when MLX can run Metal kernels here (``mlx.core.metal.is_available()``)."""
    # lazy: MLX is heavy (Metal on macOS); runners.get() imports this module without it
    import mlx.core as mx

    return bool(mx.metal.is_available())


def _require_metal() -> None:
    if not available():
        raise RuntimeError(NEEDS_METAL)


# One launch on the GPU: outputs are evaluated mx.arrays; ``source`` is the text MLX compiles
# (prelude excluded) as metal_sim reconstructs it; a diagnostic is MLX's message, which names
# lines of MLX's own program, not the user's. ``findings`` is always empty: real hardware has no
# sanitizer, so out-of-bounds accesses, races and divergent barriers go unreported here.
MlxRun = LaunchRecord


def _shape_only(value) -> Tensor:
    """A Tensor with the dtype, shape and size of ``value`` and no copy of its data."""
    if isinstance(value, (bool, int, float)):
        return to_tensor(value)
    name = dtype_name(value.dtype)
    return Tensor(np.broadcast_to(np.zeros((), DTYPES[name][0]), tuple(value.shape)), name)


class MlxMetalKernel:
    """What ``metal_kernel(...)`` returns: call it like the MLX kernel object."""

    def __init__(self, name, input_names, output_names, source, header="",
                 ensure_row_contiguous=True, atomic_outputs=False, compile_options=None):
        import mlx.core as mx  # lazy: as in available()

        self.name, self.source, self.header = name, source, header
        self.input_names, self.output_names = list(input_names), list(output_names)
        self.atomic_outputs = atomic_outputs
        self._kernel = mx.fast.metal_kernel(
            name=name, input_names=self.input_names, output_names=self.output_names,
            source=source, header=header, ensure_row_contiguous=ensure_row_contiguous,
            atomic_outputs=atomic_outputs, compile_options=compile_options)

    def __call__(self, **kwargs):
        """Exactly MLX's kernel call: returns a list of (lazy) mx.array; MLX's errors raise."""
        return self._kernel(**kwargs)

    def generated_source(self, inputs, output_dtypes, template=None) -> str:
        """The kernel text MLX generates for these inputs (prelude excluded), via metal_sim's
        mirror of MLX's code generator."""
        tensors = [_shape_only(x) for x in inputs]
        out_types = [codegen.dtype_spelling(dtype_name(d)) for d in output_dtypes]
        values = [(n, v if isinstance(v, (bool, int)) else codegen.dtype_spelling(dtype_name(v)))
                  for n, v in template or []]
        func = codegen.kernel_name(self.name, values, tensors, out_types)
        text, _ = codegen.signature(func, self.header, self.source, self.input_names, tensors,
                                    self.output_names, out_types, values, self.atomic_outputs)
        return text + codegen.instantiation(func, values)

    def launch(self, *, reps: int = 0, **kwargs) -> MlxRun:
        """Run once and wait for the GPU; returns an MlxRun. ``reps`` timed launches on the
        same inputs follow a run that compiled, in ``timing``.

        A kernel the Metal compiler rejects gives ``compiled=False``; MLX's argument errors
        (ValueError) and a machine without Metal (RuntimeError) raise, as they are the caller's.
        """
        import mlx.core as mx  # lazy: as in available()

        _require_metal()
        source = self.generated_source(kwargs.get("inputs", []), kwargs.get("output_dtypes", []),
                                       kwargs.get("template"))
        start = time.perf_counter()
        try:
            outputs = self._kernel(**kwargs)
            mx.eval(outputs)  # MLX compiles lazily: build errors surface here
        except RuntimeError as err:
            text = str(err)
            if not any(marker in text for marker in _BUILD_ERRORS):
                raise
            return MlxRun(False, diagnostics=[Diagnostic(self.name, 0, 0, "error", text)],
                          source=source)
        kernel_s = time.perf_counter() - start
        inputs = kwargs.pop("inputs", [])
        timing = self.benchmark(lambda: inputs, warmup=1, reps=reps, **kwargs) if reps else None
        return MlxRun(True, outputs=list(outputs), source=source, kernel_s=kernel_s,
                      timing=timing)

    def benchmark(self, make_inputs: Callable[[], list], *, warmup: int = 3, reps: int = 20,
                  **launch_kwargs) -> Timing:
        """This kernel timed on fresh inputs: ``benchmark`` below."""
        return benchmark(self, make_inputs, warmup=warmup, reps=reps, **launch_kwargs)


def metal_kernel(name, input_names, output_names, source, header="", ensure_row_contiguous=True,
                 atomic_outputs=False, compile_options=None) -> MlxMetalKernel:
    """Same signature as ``mx.fast.metal_kernel`` of MLX 0.32; returns an MlxMetalKernel.

    Building the object compiles nothing (MLX compiles at the first evaluation), so this works
    on any machine; calling or launching the kernel needs Metal."""
    return MlxMetalKernel(name, input_names, output_names, source, header,
                          ensure_row_contiguous, atomic_outputs, compile_options)


def benchmark(kernel: Callable, make_inputs: Callable[[], list], *, warmup: int = 3,
              reps: int = 20, **launch_kwargs) -> Timing:
    """Time ``kernel(inputs=make_inputs(), **launch_kwargs)`` on the GPU; ``kernel`` is what
    ``metal_kernel`` returns (or any callable taking MLX's kernel arguments).

    After ``warmup`` untimed runs (compile and caches), each of ``reps`` runs gets fresh inputs,
    evaluated before the clock starts so their making is not timed; the timed region holds the
    call and ``mx.eval`` of its outputs, so the GPU work is inside it. Returns a Timing.
    Raises RuntimeError without Metal, ValueError for ``reps < 1``, and whatever MLX raises
    for a kernel that does not build.
    """
    import mlx.core as mx  # lazy: as in available()

    _require_metal()
    if reps < 1 or warmup < 0:
        raise ValueError(f"benchmark needs reps >= 1 and warmup >= 0, got {reps} and {warmup}")
    times = []
    for index in range(warmup + reps):
        inputs = make_inputs()
        mx.eval([x for x in inputs if isinstance(x, mx.array)])
        mx.synchronize()  # nothing queued before may finish inside the timed region
        start = time.perf_counter()
        mx.eval(kernel(inputs=inputs, **launch_kwargs))
        elapsed = time.perf_counter() - start
        if index >= warmup:
            times.append(elapsed)
    return Timing(statistics.median(times), min(times), reps)


def time_paired(candidate: Callable, baselines: dict[str, Callable],
                make_inputs: Callable[[], object], **options) -> PairedTiming:
    """``runners.timing.time_paired`` on this Mac's GPU (same arguments: each kernel maps
    inputs to lazy mx.arrays, ``held_out`` is required), with the macOS, GPU and MLX versions
    recorded. Raises RuntimeError without Metal, so a timing never silently comes from the
    CPU."""
    import mlx.core as mx  # lazy: as in available()

    _require_metal()
    with mx.stream(mx.gpu):
        return _time_paired(candidate, baselines, make_inputs, **options)


# The lambda reads the module's ``available`` at each call, so a test can stand one in.
RUNNER = Runner("mlx_metal", "metal", hardware=True, kernel=metal_kernel, needs=NEEDS_METAL,
                probe=lambda: available())
