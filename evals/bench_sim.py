"""Simulator speed against PoCL (OpenCL on the CPU), measured in one run.

    python -m evals.bench_sim [--reps 3] [--checks fast,bounds,full] [--quick]
                              [--only speed|isolation|KERNEL]

Six kernels (evals/bench_kernels.py), each written for metal_sim (MLX body), cuda_sim (CUDA)
and PoCL (OpenCL C): elementwise over 16M floats, a 256-thread block reduction with barriers,
a 512x512 shared-memory tiled matmul, softmax with one 2048-wide row per threadgroup, a
block-wide inclusive prefix sum (scan), and a small fp32 FlashAttention forward. Every output
is compared with numpy's; a wrong one is reported and not timed. Prints kernel times (median of
--reps; the simulators' time is measured inside the child, buffer I/O excluded; PoCL's by event
profiling), the ratio to PoCL and the geometric means, once per simulator check mode
(KPORT_SIM_CHECKS: fast, bounds, and full, the default; --checks picks others: race, uninit,
a list such as bounds+race, or both = fast,full), then compile latency of a typical kernel on a
cache miss and a hit, then what isolation costs: a whole launch in the jail and with it off (the
host's Landlock + seccomp time shown apart), and a compile both ways. `--quick` runs small
sizes (tests/evals/test_bench_sim.py). Exits 1 when an output is wrong.
Needs `pip install pyopencl pocl-binary-distribution` (the `bench` extra).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass, field
from unittest import mock

import numpy as np

from evals.bench_kernels import CUDA, METAL, NAMES, OPENCL, SIGNATURES, BenchCase, make_case
from runners import sandbox
from runners.cuda_sim import RawKernel
from runners.metal_sim import metal_kernel
from runners.settings import ConfigError, load_settings
from runners.simbuild import build_kernel
from runners.simhost import BufferArg, LaunchSpec, ScalarArg, run_launch

RTOL = ATOL = 1e-3
TARGETS = {"fast": 2, "full": 4}  # issue 19: geomean ratio to PoCL without and with checks


class PoclUnavailable(RuntimeError):
    """PoCL cannot run here; the message says why and what to do, in one line."""


@dataclass
class Row:
    """One kernel in one check mode: seconds per runtime (None when not measured) and what
    went wrong (a wrong output or a failed run), by runtime."""

    name: str
    checks: str
    seconds: dict[str, float | None] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    def ratio(self, runtime: str) -> float | None:
        sim, pocl = self.seconds.get(runtime), self.seconds.get("PoCL")
        return sim / pocl if sim is not None and pocl else None


class Pocl:
    """PoCL's CPU device with the six OpenCL kernels built, or PoclUnavailable."""

    def __init__(self) -> None:
        try:
            import pyopencl as cl  # lazy: optional (the bench extra)
        except ImportError as err:
            raise PoclUnavailable(f"pyopencl is not installed ({err}); "
                                  "pip install -e '.[bench]'") from err
        try:
            found = cl.get_platforms()
        except cl.Error as err:  # the ICD loader found no OpenCL platform at all
            found, why = [], str(err)
        else:
            why = ", ".join(p.name for p in found) or "none"
        platforms = [p for p in found if "Portable" in p.name]
        if not platforms:
            raise PoclUnavailable(f"no PoCL among OpenCL's platforms ({why}); "
                                  "pip install pocl-binary-distribution")
        self.cl = cl
        self.ctx = cl.Context(platforms[0].get_devices())
        self.queue = cl.CommandQueue(self.ctx,
                                     properties=cl.command_queue_properties.PROFILING_ENABLE)
        try:
            self.program = cl.Program(self.ctx, OPENCL).build()
        except Exception as err:  # noqa: BLE001 - PoCL's compiler failing on this host
            lines = str(err).strip().splitlines() or [""]
            why = next((ln.strip() for ln in lines if "error" in ln.lower()), lines[-1])
            hint = (" (PoCL's LLVM does not know this CPU, and PoCL 3.0 reads no variable "
                    "that picks another; try another pocl-binary-distribution)"
                    if "unknown target CPU" in str(err) else "")
            raise PoclUnavailable(f"PoCL could not compile OpenCL C here: {why}{hint}") from err

    def time(self, case: BenchCase, reps: int) -> tuple[float, np.ndarray]:
        """Median kernel seconds by event profiling, and the output."""
        cl, mf = self.cl, self.cl.mem_flags
        bufs = [cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
                for a in case.arrays]
        out = np.zeros(case.want.size, np.float32)
        out_buf = cl.Buffer(self.ctx, mf.WRITE_ONLY, out.nbytes)
        kernel = cl.Kernel(self.program, case.entry)
        dims = 1 + max((i for i in range(3) if case.groups[i] > 1), default=0)
        times = []
        for _ in range(reps):
            ev = kernel(self.queue, case.grid[:dims], case.threads[:dims], *bufs, out_buf,
                        *(np.int32(s) for s in case.scalars))
            ev.wait()
            times.append((ev.profile.end - ev.profile.start) * 1e-9)
        cl.enqueue_copy(self.queue, out, out_buf).wait()
        return statistics.median(times), out


def time_cuda_sim(case: BenchCase, reps: int) -> tuple[float, np.ndarray]:
    """Median kernel seconds in cuda_sim and the output; RuntimeError when a run fails."""
    k = RawKernel(CUDA[case.name], case.entry)
    times, out = [], None
    for _ in range(reps):
        out = np.zeros(case.want.size, np.float32)
        run = k.launch(case.groups, case.threads,
                       [*case.arrays, out, *(np.int32(s) for s in case.scalars)])
        if not run.ok or run.findings:
            raise RuntimeError(str(run.findings or run.diagnostics)[:300])
        times.append(run.kernel_s)
    return statistics.median(times), out


def time_metal_sim(case: BenchCase, reps: int) -> tuple[float, np.ndarray]:
    """Median kernel seconds in metal_sim and the output; RuntimeError when a run fails."""
    import mlx.core as mx  # lazy: MLX is heavy; only the metal_sim timing needs it

    times, out = [], None
    for _ in range(reps):
        k = metal_kernel(case.entry, list(SIGNATURES[case.name][1]), ["y"], METAL[case.name])
        run = k.launch(inputs=[*case.arrays, *case.scalars], output_shapes=[(case.want.size,)],
                       output_dtypes=[mx.float32], grid=case.grid, threadgroup=case.threads)
        if not run.ok or run.findings:
            raise RuntimeError(str(run.findings or run.diagnostics)[:300])
        times.append(run.kernel_s)
        out = np.array(run.outputs[0])
    return statistics.median(times), out


def measure(row: Row, runtime: str, timer, case: BenchCase, reps: int) -> None:
    """Time one runtime into `row`, keeping no time for a failed run or a wrong output."""
    try:
        seconds, got = timer(case, reps)
    except RuntimeError as err:
        row.problems[runtime] = f"run failed: {err}"
        return
    if not np.allclose(got, case.want, rtol=RTOL, atol=ATOL):
        worst = float(np.max(np.abs(got.astype(np.float64) - case.want)))
        row.problems[runtime] = f"wrong output (max abs error {worst:.3g})"
        return
    row.seconds[runtime] = seconds

def compile_latency() -> tuple[float, float]:
    """Seconds to build a typical kernel on a cache miss and on a hit."""
    unique = f"// {time.time_ns()}\n" + CUDA["reduction"]
    tu = RawKernel(unique, "red")._translation_unit()
    checked = bool(load_settings().sim_check_set)
    start = time.perf_counter()
    miss = build_kernel(tu, checked=checked, dialect="cuda")
    t_miss = time.perf_counter() - start
    start = time.perf_counter()
    hit = build_kernel(tu, checked=checked, dialect="cuda")
    t_hit = time.perf_counter() - start
    assert miss.ok and hit.cached
    return t_miss, t_hit


def isolation_cost(reps: int) -> dict[str, float]:
    """Median seconds of one whole launch of a small cached kernel (request, buffers, the
    child, its result) in the jail and with the jail off, the host's Landlock + seccomp time,
    and the same for a compile (cache miss) with and without the jail."""
    x = np.arange(4096, dtype=np.float32)

    def measure() -> tuple[float, float, float]:
        settings = load_settings()
        tu = RawKernel(f"// {time.time_ns()}\n" + CUDA["elementwise"], "ew")._translation_unit()
        start = time.perf_counter()
        build = build_kernel(tu, checked=True, dialect="cuda", settings=settings)
        compile_s = time.perf_counter() - start
        spec = LaunchSpec((16, 1, 1), (256, 1, 1), (4096, 1, 1), False, 49152)
        walls, locks = [], []
        for _ in range(reps * 10):
            args = [BufferArg("x", x, "in"), BufferArg("y", np.zeros_like(x), "out"),
                    ScalarArg("n", np.int32(4096).tobytes())]
            start = time.perf_counter()
            result = run_launch(build.library, spec, args, settings)
            walls.append(time.perf_counter() - start)
            locks.append(result.lockdown_s)
        return statistics.median(walls), statistics.median(locks), compile_s

    jailed, lockdown, compile_jailed = measure()
    off = ("", "benchmark: jail off for comparison")
    with mock.patch.dict(os.environ, {"KPORT_UNSANDBOXED": "1"}), \
            mock.patch.object(sandbox, "_probe", lambda: off):
        bare, _, compile_bare = measure()
    return {"launch_jailed": jailed, "launch_bare": bare, "lockdown": lockdown,
            "compile_jailed": compile_jailed, "compile_bare": compile_bare}


def speed(reps: int, modes: tuple[str, ...], names: tuple[str, ...] = NAMES,
          quick: bool = False) -> list[Row]:
    """Each kernel in PoCL once, then in both simulators under each check mode; prints one
    table per mode with ratios to PoCL and their geometric means; returns the rows."""
    rng = np.random.default_rng(0)
    cases = {name: make_case(name, rng, quick) for name in names}
    pocl_s: dict[str, float | None] = dict.fromkeys(names)
    pocl_problem: dict[str, str] = {}
    try:
        pocl = Pocl()
    except PoclUnavailable as err:
        print(f"PoCL comparison not measured: {err}")
        pocl = None
    for name, case in cases.items():
        if pocl is not None:
            probe = Row(name, "PoCL")
            measure(probe, "PoCL", pocl.time, case, reps)
            pocl_s[name] = probe.seconds.get("PoCL")
            pocl_problem.update(probe.problems)
    rows = []
    for checks in modes:
        os.environ["KPORT_SIM_CHECKS"] = checks
        print(f"\nchecks: {checks}")
        print(f"{'kernel':<12} {'PoCL s':>9} {'cuda_sim s':>11} {'metal_sim s':>12} "
              f"{'cuda/PoCL':>10} {'metal/PoCL':>11}")
        for name, case in cases.items():
            row = Row(name, checks, {"PoCL": pocl_s[name]})
            if name in pocl_problem:
                row.problems["PoCL"] = pocl_problem[name]
            measure(row, "cuda_sim", time_cuda_sim, case, reps)
            measure(row, "metal_sim", time_metal_sim, case, reps)
            rows.append(row)
            print(f"{name:<12} {_cell(row.seconds.get('PoCL'), 9, '.4f')} "
                  f"{_cell(row.seconds.get('cuda_sim'), 11, '.4f')} "
                  f"{_cell(row.seconds.get('metal_sim'), 12, '.4f')} "
                  f"{_cell(row.ratio('cuda_sim'), 10, '.2f')} "
                  f"{_cell(row.ratio('metal_sim'), 11, '.2f')}")
            for runtime, problem in row.problems.items():
                print(f"  {runtime} {name}: {problem}")
        mode_rows = [r for r in rows if r.checks == checks]
        means = [_geomean([r.ratio(rt) for r in mode_rows]) for rt in ("cuda_sim", "metal_sim")]
        both = _geomean([r.ratio(rt) for r in mode_rows for rt in ("cuda_sim", "metal_sim")])
        target = f" (target <= {TARGETS[checks]})" if checks in TARGETS else ""
        print(f"{'geomean':<12} {'':>9} {'':>11} {'':>12} {_cell(means[0], 10, '.2f')} "
              f"{_cell(means[1], 11, '.2f')}   both: {_cell(both, 0, '.2f')}{target}")
    return rows


def check_modes(text: str) -> tuple[str, ...]:
    """--checks: the KPORT_SIM_CHECKS values to time, in order (a mode of several checks is
    written with '+': bounds+race). Raises ArgumentTypeError naming a bad one."""
    modes = []
    for part in (p.strip() for p in text.split(",")):
        for mode in ("fast", "full") if part == "both" else (part,):
            try:
                modes.append(load_settings(env={"KPORT_SIM_CHECKS": mode.replace("+", ",")},
                                           overrides={}).sim_checks)
            except ConfigError as err:
                raise argparse.ArgumentTypeError(f"{part!r}: {err}") from None
    return tuple(dict.fromkeys(modes))


def _geomean(ratios: list[float | None]) -> float | None:
    kept = [r for r in ratios if r is not None]
    return float(np.exp(np.mean(np.log(kept)))) if kept and len(kept) == len(ratios) else None


def _cell(value: float | None, width: int, spec: str) -> str:
    return f"{'-' if value is None else format(value, spec):>{width}}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.bench_sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--checks", type=check_modes, default="fast,bounds,full",
                        help="simulator check modes to time, comma-separated, each a "
                        "KPORT_SIM_CHECKS value (fast, full, bounds, race, uninit, or checks "
                        "joined by '+': bounds+race); 'both' is fast,full (default: "
                        "fast,bounds,full)")
    parser.add_argument("--only", choices=("speed", "isolation", *NAMES),
                        help="only the PoCL comparison (or one kernel of it), or only compile "
                        "latency and isolation")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes: checks the kernels, times nothing meaningful")
    args = parser.parse_args(argv)
    modes = args.checks
    print(f"cores: {os.cpu_count()}  load: {os.getloadavg()[0]:.2f}  "
          f"checks: {' '.join(modes)}  "
          f"reps: {args.reps}{'  (quick sizes)' if args.quick else ''}")
    wrong = False
    if args.only != "isolation":
        names = (args.only,) if args.only in NAMES else NAMES
        rows = speed(args.reps, modes, names, args.quick)
        wrong = any(p.startswith("wrong") for r in rows for p in r.problems.values())
    if args.only is None or args.only == "isolation":
        os.environ["KPORT_SIM_CHECKS"] = modes[0]
        overheads(args.reps)
    return 1 if wrong else 0


def overheads(reps: int) -> None:
    """Compile latency, and what isolation adds to a launch and a compile."""
    t_miss, t_hit = compile_latency()
    print(f"compile latency: {t_miss * 1000:.0f} ms on a cache miss (target <= 500), "
          f"{t_hit * 1000:.1f} ms on a hit (target <= 30)")
    cost = isolation_cost(reps)
    print(f"isolation: a launch takes {cost['launch_jailed'] * 1000:.1f} ms in the jail, "
          f"{cost['launch_bare'] * 1000:.1f} ms without: +"
          f"{(cost['launch_jailed'] - cost['launch_bare']) * 1000:.1f} ms (target <= 50), of "
          f"which Landlock + seccomp {cost['lockdown'] * 1000:.2f} ms; a compile "
          f"{cost['compile_jailed'] * 1000:.0f} ms jailed (preprocess, compile, link), "
          f"{cost['compile_bare'] * 1000:.0f} ms without the jail")


if __name__ == "__main__":
    raise SystemExit(main())
