"""metal_sim's counting launches and the counted arithmetic (runners/opcount.py), on kernels
whose counts follow by hand from their access pattern and their operations."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from agent.perf_metal import NotScored, score_metal
from runners.cuda_sim import RawKernel
from runners.metal_sim import MetalLibrary, metal_kernel

N = 64  # two SIMD-groups of 32


def counted(source: str, inputs: list, outputs: int = 1, dtypes=None, n: int = N) -> dict:
    names = [f"o{k}" for k in range(outputs)]
    kernel = metal_kernel("k", [f"a{k}" for k in range(len(inputs))], names, source)
    run = kernel.launch(inputs=inputs, output_shapes=[(n,)] * outputs,
                        output_dtypes=dtypes or [mx.float32] * outputs, grid=(n, 1, 1),
                        threadgroup=(32, 1, 1), count=True)
    assert run.compiled and not run.findings, (run.diagnostics, run.findings)
    return run.counters


def floats(n: int = N) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


def test_coalesced_float_copy_is_one_instruction_per_simdgroup_and_n_8_sectors():
    c = counted("uint i = thread_position_in_grid.x; o0[i] = a0[i];", [floats()])
    assert c["global_load_instructions"] == N // 32 and c["global_store_instructions"] == N // 32
    assert c["global_load_sectors"] == N // 8 and c["global_store_sectors"] == N // 8
    assert c["groups"] == 2 and c["threads"] == N


def test_stride_32_read_is_a_sector_per_lane():
    c = counted("uint i = thread_position_in_grid.x; o0[i] = a0[i * 32];", [floats(N * 32)])
    assert c["global_load_instructions"] == N // 32 and c["global_load_sectors"] == N


def test_threadgroup_stride_two_is_a_two_way_bank_conflict():
    src = """uint i = thread_position_in_threadgroup.x;
threadgroup float s[64];
s[i * 2] = a0[i];
threadgroup_barrier(mem_flags::mem_threadgroup);
o0[thread_position_in_grid.x] = s[i * 2];"""
    c = counted(src, [floats()])
    # per SIMD-group: 32 lanes on even words -> banks 0, 2, ..., 30 twice each: 2 wavefronts
    assert c["shared_store_instructions"] == 2 and c["shared_store_wavefronts"] == 4
    assert c["shared_load_wavefronts"] == 4 and c["barrier_arrivals"] == N


def test_standalone_library_counts_like_metal_kernel():
    lib = MetalLibrary("kernel void c(device const float* a [[buffer(0)]], device float* b "
                       "[[buffer(1)]], uint i [[thread_position_in_grid]]) { b[i] = a[i]; }")
    run = lib.function("c").launch({0: floats(), 1: np.zeros(N, np.float32)}, grid=(N, 1, 1),
                                   threadgroup=(32, 1, 1), count=True)
    assert run.ok and run.counters["global_load_sectors"] == N // 8
    assert run.counters["global_load_instructions"] == N // 32


def test_arithmetic_is_counted_by_class_per_thread():
    src = """uint i = thread_position_in_grid.x;
float v = a0[i];
o0[i] = exp(v);
o1[i] = v * v;
o2[i] = int(i) * a1;
o3[i] = half(v) * half(v);"""
    c = counted(src, [floats(), np.int32(3)], outputs=4,
                dtypes=[mx.float32, mx.float32, mx.int32, mx.float16])
    # one exp, one float multiply, one integer multiply, one half multiply per thread
    assert c["ops_transcendental"] == N and c["ops_fp32"] == N
    assert c["ops_int_mul"] == N and c["ops_fp16"] == N and c["ops_fp64"] == 0


def test_loop_operations_count_every_iteration():
    src = """uint i = thread_position_in_grid.x;
float acc = 0.0f;
for (int j = 0; j < a1; j++) acc += a0[j] * a0[i];
o0[i] = acc;"""
    c = counted(src, [floats(), np.int32(10)])
    # 10 iterations of a multiply-add (one fused operation, or a multiply and an add)
    assert c["ops_fp32"] in (10 * N, 20 * N)
    assert c["ops_int"] >= 10 * N  # the loop's compare (and increment)


def test_cuda_sim_counts_arithmetic_too():
    src = r"""extern "C" __global__ void k(const float* x, float* y) {
  int i = threadIdx.x; y[i] = sqrtf(x[i]) + x[i];
}"""
    y = np.zeros(N, np.float32)
    run = RawKernel(src, "k").launch((1,), (N,), [floats(), y], count=True)
    assert run.ok and run.counters["ops_transcendental"] == N and run.counters["ops_fp32"] == N


def test_score_metal_ranks_strided_below_coalesced_and_refuses_a_broken_candidate():
    n = 1 << 14
    args = (["a0"], ["o0"], [floats(n * 8)], [(n,)], [mx.float32], (n, 1, 1), (256, 1, 1))
    fast = score_metal("uint i = thread_position_in_grid.x; o0[i] = a0[i];", "", *args)
    slow = score_metal("uint i = thread_position_in_grid.x; o0[i] = a0[i * 8];", "", *args)
    assert slow.predicted_s > fast.predicted_s and fast.counters["global_load_sectors"] == n // 8
    with pytest.raises(NotScored, match="did not run in metal_sim"):
        score_metal("o0[0] = undeclared;", "", *args)
