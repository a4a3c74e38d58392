"""Simulator speed against PoCL (OpenCL on the CPU), measured in one run.

    python -m evals.bench_sim [--reps 3] [--checks fast|full] [--only speed|isolation]

Three kernels, each written for metal_sim (MLX body), cuda_sim (CUDA) and PoCL (OpenCL C):
elementwise over 16M floats, a 256-thread block reduction over 4096 blocks, and a 512x512
shared-memory tiled matmul. Prints kernel times (median of --reps; the simulators' time is
measured inside the child, buffer I/O excluded; PoCL's by event profiling), the ratio to PoCL
and the geometric mean, then compile latency of a typical kernel on a cache miss and a hit,
then what isolation costs: a whole launch in the jail and with it off (the host's Landlock +
seccomp time shown apart), and a compile both ways.
Needs `pip install pyopencl pocl-binary-distribution` (the `bench` extra).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from unittest import mock

import numpy as np

from runners import sandbox
from runners.cuda_sim import RawKernel
from runners.metal_sim import metal_kernel
from runners.settings import load_settings
from runners.simbuild import build_kernel
from runners.simhost import BufferArg, LaunchSpec, ScalarArg, run_launch

N_ELEM = 16 * 1024 * 1024
RED_BLOCKS, RED_THREADS = 4096, 256
MM = 512
TILE = 16

CUDA = {
    "elementwise": r"""extern "C" __global__ void ew(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 1.5f + 0.25f; }""",
    "reduction": r"""extern "C" __global__ void red(const float* x, float* out) {
  __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 256 + t];
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) out[blockIdx.x] = s[0]; }""",
    "matmul": r"""extern "C" __global__ void mm(const float* A, const float* B, float* C, int n) {
  __shared__ float As[16][16], Bs[16][16];
  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += 16) {
    As[threadIdx.y][threadIdx.x] = A[r * n + k0 + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * n + c];
    __syncthreads();
    for (int k = 0; k < 16; k++) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[r * n + c] = acc; }""",
}

METAL = {
    "elementwise": "uint i = thread_position_in_grid.x;\ny[i] = x[i] * 1.5f + 0.25f;",
    "reduction": """threadgroup float s[256];
uint t = thread_position_in_threadgroup.x;
s[t] = x[threadgroup_position_in_grid.x * 256 + t];
threadgroup_barrier(mem_flags::mem_threadgroup);
for (uint k = 128; k > 0; k >>= 1) {
  if (t < k) s[t] += s[t + k];
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (t == 0) y[threadgroup_position_in_grid.x] = s[0];""",
    "matmul": """threadgroup float As[16][16];
threadgroup float Bs[16][16];
uint2 l = thread_position_in_threadgroup.xy;
uint r = thread_position_in_grid.y, c = thread_position_in_grid.x;
float acc = 0.0f;
for (int k0 = 0; k0 < n; k0 += 16) {
  As[l.y][l.x] = a[r * n + k0 + l.x];
  Bs[l.y][l.x] = b[(k0 + l.y) * n + c];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int k = 0; k < 16; k++) acc += As[l.y][k] * Bs[k][l.x];
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
y[r * n + c] = acc;""",
}

OPENCL = r"""
__kernel void ew(__global const float* x, __global float* y, int n) {
  int i = get_global_id(0); if (i < n) y[i] = x[i] * 1.5f + 0.25f; }
__kernel void red(__global const float* x, __global float* out) {
  __local float s[256]; int t = get_local_id(0);
  s[t] = x[get_group_id(0) * 256 + t]; barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = 128; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; barrier(CLK_LOCAL_MEM_FENCE); }
  if (t == 0) out[get_group_id(0)] = s[0]; }
__kernel void mm(__global const float* A, __global const float* B, __global float* C, int n) {
  __local float As[16][16], Bs[16][16];
  int tx = get_local_id(0), ty = get_local_id(1);
  int r = get_group_id(1) * 16 + ty, c = get_group_id(0) * 16 + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += 16) {
    As[ty][tx] = A[r * n + k0 + tx]; Bs[ty][tx] = B[(k0 + ty) * n + c];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < 16; k++) acc += As[ty][k] * Bs[k][tx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  C[r * n + c] = acc; }
"""


def _inputs(rng):
    return {
        "elementwise": [rng.standard_normal(N_ELEM, dtype=np.float32)],
        "reduction": [rng.standard_normal(RED_BLOCKS * RED_THREADS, dtype=np.float32)],
        "matmul": [rng.standard_normal(MM * MM, dtype=np.float32),
                   rng.standard_normal(MM * MM, dtype=np.float32)],
    }


def _expected(name, ins):
    if name == "elementwise":
        return ins[0] * 1.5 + 0.25
    if name == "reduction":
        return ins[0].reshape(RED_BLOCKS, RED_THREADS).sum(axis=1)
    return (ins[0].reshape(MM, MM) @ ins[1].reshape(MM, MM)).reshape(-1)


def time_cuda_sim(name, ins, reps):
    kernel = {"elementwise": "ew", "reduction": "red", "matmul": "mm"}[name]
    k = RawKernel(CUDA[name], kernel)
    times, out = [], None
    for _ in range(reps):
        if name == "elementwise":
            out = np.zeros(N_ELEM, np.float32)
            run = k.launch((N_ELEM // 256,), (256,), [ins[0], out, np.int32(N_ELEM)])
        elif name == "reduction":
            out = np.zeros(RED_BLOCKS, np.float32)
            run = k.launch((RED_BLOCKS,), (RED_THREADS,), [ins[0], out])
        else:
            out = np.zeros(MM * MM, np.float32)
            run = k.launch((MM // TILE, MM // TILE), (TILE, TILE), [*ins, out, np.int32(MM)])
        assert run.ok, run.findings or run.diagnostics
        times.append(run.kernel_s)
    return statistics.median(times), out


def time_metal_sim(name, ins, reps):
    import mlx.core as mx  # lazy: MLX is heavy; only the metal_sim timing needs it

    times, out = [], None
    for _ in range(reps):
        if name == "elementwise":
            k = metal_kernel("ew", ["x"], ["y"], METAL[name])
            run = k.launch(inputs=ins, output_shapes=[(N_ELEM,)], output_dtypes=[mx.float32],
                           grid=(N_ELEM, 1, 1), threadgroup=(256, 1, 1))
        elif name == "reduction":
            k = metal_kernel("red", ["x"], ["y"], METAL[name])
            run = k.launch(inputs=ins, output_shapes=[(RED_BLOCKS,)], output_dtypes=[mx.float32],
                           grid=(RED_BLOCKS * RED_THREADS, 1, 1), threadgroup=(RED_THREADS, 1, 1))
        else:
            k = metal_kernel("mm", ["a", "b", "n"], ["y"], METAL[name])
            run = k.launch(inputs=[*ins, MM], output_shapes=[(MM * MM,)],
                           output_dtypes=[mx.float32], grid=(MM, MM, 1),
                           threadgroup=(TILE, TILE, 1))
        assert run.ok, run.findings or run.diagnostics
        times.append(run.kernel_s)
        out = np.array(run.outputs[0])
    return statistics.median(times), out


def time_pocl(name, ins, reps):
    import pyopencl as cl  # lazy: optional (the bench extra)

    platform = next(p for p in cl.get_platforms() if "Portable" in p.name)
    ctx = cl.Context(platform.get_devices())
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    prog = cl.Program(ctx, OPENCL).build()
    mf = cl.mem_flags
    bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a) for a in ins]
    n_out = {"elementwise": N_ELEM, "reduction": RED_BLOCKS, "matmul": MM * MM}[name]
    out = np.zeros(n_out, np.float32)
    out_buf = cl.Buffer(ctx, mf.WRITE_ONLY, out.nbytes)
    kernel = cl.Kernel(prog, {"elementwise": "ew", "reduction": "red", "matmul": "mm"}[name])
    times = []
    for _ in range(reps):
        if name == "elementwise":
            ev = kernel(queue, (N_ELEM,), (256,), bufs[0], out_buf, np.int32(N_ELEM))
        elif name == "reduction":
            ev = kernel(queue, (RED_BLOCKS * RED_THREADS,), (RED_THREADS,), bufs[0], out_buf)
        else:
            ev = kernel(queue, (MM, MM), (TILE, TILE), *bufs, out_buf, np.int32(MM))
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-9)
    cl.enqueue_copy(queue, out, out_buf).wait()
    return statistics.median(times), out


def compile_latency() -> tuple[float, float]:
    """Seconds to build a typical kernel on a cache miss and on a hit."""
    unique = f"// {time.time_ns()}\n" + CUDA["reduction"]
    tu = RawKernel(unique, "red")._translation_unit()
    checked = load_settings().sim_checks == "full"
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.bench_sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--checks", choices=("fast", "full"), default="fast",
                        help="simulator checks during timing (default fast, as a benchmark)")
    parser.add_argument("--only", choices=("speed", "isolation"),
                        help="only the PoCL comparison, or only compile latency and isolation")
    args = parser.parse_args(argv)
    os.environ["KPORT_SIM_CHECKS"] = args.checks
    print(f"cores: {os.cpu_count()}  checks: {args.checks}  reps: {args.reps}")
    if args.only != "isolation":
        try:
            speed(args.reps)
        except Exception as err:  # noqa: BLE001 - PoCL's own failure: say so, measure the rest
            lines = str(err).strip().splitlines() or [""]
            why = next((ln for ln in lines if "error:" in ln), lines[-1])
            print(f"PoCL comparison not measured: {type(err).__name__}: {why}")
    if args.only != "speed":
        overheads(args.reps)
    return 0


def speed(reps: int) -> None:
    """The simulators' kernel times against PoCL's, and their geometric mean."""
    ins = _inputs(np.random.default_rng(0))
    print(f"{'kernel':<12} {'PoCL s':>9} {'cuda_sim s':>11} {'metal_sim s':>12} "
          f"{'cuda/PoCL':>10} {'metal/PoCL':>11}")
    ratios = []
    for name in ("elementwise", "reduction", "matmul"):
        t_pocl, o_pocl = time_pocl(name, ins[name], reps)
        t_cuda, o_cuda = time_cuda_sim(name, ins[name], reps)
        t_metal, o_metal = time_metal_sim(name, ins[name], reps)
        want = _expected(name, ins[name])
        for label, got in (("PoCL", o_pocl), ("cuda_sim", o_cuda), ("metal_sim", o_metal)):
            if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
                print(f"  WARNING: {label} {name} result is wrong")
        ratios += [t_cuda / t_pocl, t_metal / t_pocl]
        print(f"{name:<12} {t_pocl:>9.4f} {t_cuda:>11.4f} {t_metal:>12.4f} "
              f"{t_cuda / t_pocl:>10.2f} {t_metal / t_pocl:>11.2f}")
    geomean = float(np.exp(np.mean(np.log(ratios))))
    print(f"geomean simulator/PoCL time ratio: {geomean:.2f} (target <= 2)")


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
