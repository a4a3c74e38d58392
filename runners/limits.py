"""The limits of the GPUs kport models and of kport itself, and the checks every input meets
before any work starts: launch sizes, bytes to allocate, tolerances and timeouts.

Every check raises InputError (a KportError: the CLI prints one line, exit 2) whose message
begins with ``where`` (the file and key, or the option) and ends with the fix. The simulators
keep raising ValueError for the same limits, as MLX and CuPy do; the CLIs and the case loader
check first so that a person never meets those.
"""

from __future__ import annotations

import math

from runners.errors import KportError

# Apple GPUs (Metal Feature Set Tables): a pipeline may allow fewer threads (unknowable here).
METAL_MAX_THREADS_PER_THREADGROUP = 1024
METAL_THREADGROUP_MEMORY = 32 * 1024
# thread_position_in_grid is a uint3: a grid side past 2**32 - 1 cannot be addressed.
METAL_MAX_GRID_SIDE = 2**32 - 1
# CUDA (Programming Guide, "Technical Specifications per Compute Capability", cc >= 3.0).
CUDA_MAX_THREADS_PER_BLOCK = 1024
CUDA_MAX_BLOCK = (1024, 1024, 64)
CUDA_MAX_GRID = (2**31 - 1, 65535, 65535)
CUDA_STATIC_SHARED = 48 * 1024  # bytes of static __shared__ per block
CUDA_DYNAMIC_SHARED = 227 * 1024  # opt-in maximum on sm_90 (H100/H200)
# What one simulated launch may hold in buffers (the simulator host maps them all).
MAX_LAUNCH_BYTES = 4 << 30


class InputError(KportError):
    """An input out of range; the message names where it came from and the fix."""


def _dims(values, where: str, what: str) -> tuple[int, int, int]:
    dims = list(values)
    if not 1 <= len(dims) <= 3:
        raise InputError(f"{where}: give 1 to 3 {what} sizes, not {len(dims)}")
    for v in dims:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{where}: {what} sizes must be positive integers, got {v!r}")
    return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]


def check_metal_launch(grid, threadgroup, where: str) -> None:
    """A Metal dispatch of ``grid`` threads in threadgroups of ``threadgroup``; InputError when
    Metal could not run it."""
    grid, tg = _dims(grid, where, "grid"), _dims(threadgroup, where, "threadgroup")
    if math.prod(tg) > METAL_MAX_THREADS_PER_THREADGROUP:
        raise InputError(f"{where}: a threadgroup of {math.prod(tg)} threads is over Metal's "
                         f"{METAL_MAX_THREADS_PER_THREADGROUP}; use fewer threads per group")
    if max(grid) > METAL_MAX_GRID_SIDE:
        raise InputError(f"{where}: a grid side of {max(grid)} threads is over "
                         f"{METAL_MAX_GRID_SIDE} (thread_position_in_grid is a uint); split "
                         "the work over another grid dimension")


def check_cuda_launch(grid, block, where: str, shared_mem: int = 0) -> None:
    """A CUDA launch <<<grid, block, shared_mem>>>; InputError when CUDA would refuse it."""
    grid, block = _dims(grid, where, "grid"), _dims(block, where, "block")
    if math.prod(block) > CUDA_MAX_THREADS_PER_BLOCK:
        raise InputError(f"{where}: a block of {math.prod(block)} threads is over CUDA's "
                         f"{CUDA_MAX_THREADS_PER_BLOCK}; use fewer threads per block")
    for axis, (got, most) in enumerate(zip(block, CUDA_MAX_BLOCK, strict=True)):
        if got > most:
            raise InputError(f"{where}: block side {'xyz'[axis]} = {got} is over CUDA's {most}")
    for axis, (got, most) in enumerate(zip(grid, CUDA_MAX_GRID, strict=True)):
        if got > most:
            raise InputError(f"{where}: grid side {'xyz'[axis]} = {got} blocks is over CUDA's "
                             f"{most}; move work to another grid dimension")
    if isinstance(shared_mem, bool) or not isinstance(shared_mem, int) or \
            not 0 <= shared_mem <= CUDA_DYNAMIC_SHARED:
        raise InputError(f"{where}: dynamic shared memory of {shared_mem!r} bytes; give 0 to "
                         f"{CUDA_DYNAMIC_SHARED} (the sm_90 opt-in maximum)")


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_bytes(nbytes: int, where: str, limit: int = MAX_LAUNCH_BYTES) -> None:
    """Arrays of ``nbytes`` in all, before they are allocated; InputError over ``limit``."""
    if nbytes > limit:
        raise InputError(f"{where}: the arrays need {human_bytes(nbytes)}, over the "
                         f"{human_bytes(limit)} one simulated launch may hold; use smaller sizes")


def check_shape(shape, itemsize: int, where: str) -> int:
    """An array shape someone asked for: positive integer sides; returns its bytes, refused
    (InputError) over what one simulated launch may hold."""
    sides = list(shape)
    if not sides or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in sides):
        raise InputError(f"{where}: every side of a shape must be a positive integer, got "
                         f"{sides!r}")
    nbytes = math.prod(sides) * itemsize
    check_bytes(nbytes, where)
    return nbytes


def check_seconds(value, where: str) -> float:
    """A time budget: a finite number of seconds above zero."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value <= 0:
        raise InputError(f"{where}: {value!r} is not a time budget; give a positive number of "
                         "seconds, e.g. 60")
    return float(value)


def check_tolerance(value, where: str, most: float) -> float:
    """A comparison tolerance: finite, at least 0 and at most ``most`` (a looser one accepts
    wrong results, which is worse than a refused case)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not 0 <= value <= most:
        raise InputError(f"{where}: {value!r} is not a tolerance; give a number from 0 to "
                         f"{most:g}")
    return float(value)


def seconds_option(flag: str):
    """A typer callback for a time-budget option: `--timeout nan` or `inf` is an InputError
    naming ``flag`` (click's own ranges let NaN and infinity through)."""
    def check(value):
        return value if value is None else check_seconds(value, flag)
    return check
