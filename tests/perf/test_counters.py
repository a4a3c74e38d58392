"""cuda_sim's performance counters (runners/simcore/rt/counters.cpp) on kernels whose counts
can be worked out by hand: one warp of 32 threads unless a test says otherwise."""

from __future__ import annotations

import numpy as np

from runners.cuda_sim import RawKernel

SRC = r"""
extern "C" __global__ void coalesced(const float* a, float* b) {
  int i = threadIdx.x; b[i] = a[i];
}
extern "C" __global__ void stride32(const float* a, float* b) {
  int i = threadIdx.x; b[i] = a[i * 32];
}
extern "C" __global__ void misaligned(const float* a, float* b) {
  int i = threadIdx.x; b[i] = a[i + 1];
}
extern "C" __global__ void vector4(const float4* a, float4* b) {
  int i = threadIdx.x; b[i] = a[i];
}
extern "C" __global__ void scattered_store(float* b) {
  b[threadIdx.x * 32] = 1.0f;
}
extern "C" __global__ void bank_conflict2(float* b) {
  __shared__ float s[64];
  int i = threadIdx.x;
  s[i * 2] = i;
  __syncthreads();
  b[i] = s[i * 2];
}
extern "C" __global__ void broadcast(float* b) {
  __shared__ float s[32];
  int i = threadIdx.x;
  s[i] = i;
  __syncthreads();
  b[i] = s[0];
}
extern "C" __global__ void shuffle_atomic(float* b) {
  float v = threadIdx.x;
  v += __shfl_down_sync(0xffffffffu, v, 16);
  atomicAdd(b, v);
}
"""


def counted(name: str, args: list, block: int = 32, grid: int = 1) -> dict:
    run = RawKernel(SRC, name).launch((grid,), (block,), args, count=True)
    assert run.compiled and not run.findings, (run.diagnostics, run.findings)
    return run.counters


def floats(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


def test_coalesced_float_load_of_a_warp_is_4_sectors():
    c = counted("coalesced", [floats(32), floats(32)])
    assert c["global_load_instructions"] == 1
    assert c["global_load_sectors"] == 4
    assert c["global_load_bytes"] == 128
    assert c["global_store_sectors"] == 4 and c["global_store_partial_sectors"] == 0
    assert c["footprint_sectors"] == 8


def test_stride_32_load_is_32_sectors_for_128_bytes_requested():
    c = counted("stride32", [floats(32 * 32), floats(32)])
    assert c["global_load_sectors"] == 32
    assert c["global_load_bytes"] == 128
    assert c["global_load_segments64"] == 32


def test_misaligned_by_one_float_touches_a_fifth_sector():
    assert counted("misaligned", [floats(64), floats(32)])["global_load_sectors"] == 5


def test_float4_load_of_a_warp_is_16_sectors_in_one_instruction():
    c = counted("vector4", [floats(128), floats(128)])
    assert c["global_load_instructions"] == 1 and c["global_load_sectors"] == 16


def test_scattered_stores_write_only_part_of_each_sector():
    c = counted("scattered_store", [floats(32 * 32)])
    assert c["global_store_sectors"] == 32 and c["global_store_partial_sectors"] == 32


def test_two_way_bank_conflict_is_two_wavefronts():
    c = counted("bank_conflict2", [floats(32)])
    assert c["shared_store_instructions"] == 1 and c["shared_store_wavefronts"] == 2
    assert c["shared_load_instructions"] == 1 and c["shared_load_wavefronts"] == 2
    assert c["barrier_arrivals"] == 32


def test_broadcast_read_is_one_wavefront():
    c = counted("broadcast", [floats(32)])
    assert c["shared_load_wavefronts"] == 1 and c["shared_store_wavefronts"] == 1


def test_collectives_and_same_address_atomics():
    c = counted("shuffle_atomic", [floats(1)])
    assert c["collective_arrivals"] == 32
    assert c["global_atomic_instructions"] == 1 and c["global_atomic_ops"] == 32
    assert c["atomic_same_address_lanes"] == 31 and c["atomic_addresses"] == 1
    assert c.get("global_load_instructions", 0) == 0  # the atomic is not a plain access too


def test_warps_and_groups_are_counted_apart():
    # 4 groups of 64 threads: 2 warps each, one load instruction per warp
    c = counted("coalesced", [floats(64), floats(64)], block=64, grid=4)
    assert c["groups"] == 4 and c["threads"] == 256
    assert c["global_load_instructions"] == 8 and c["global_load_sectors"] == 32


def test_no_counters_without_count():
    run = RawKernel(SRC, "coalesced").launch((1,), (32,), [floats(32), floats(32)])
    assert run.ok and run.counters == {}


GEMM = r"""
extern "C" __global__ void gemm8(const float* A, const float* B, float* C, int n) {
  __shared__ float As[8][8], Bs[8][8];
  int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * 8 + ty, col = blockIdx.x * 8 + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += 8) {
    As[ty][tx] = A[(size_t)row * n + k0 + tx];
    Bs[ty][tx] = B[(size_t)(k0 + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < 8; k++) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[(size_t)row * n + col] = acc;
}
"""


def test_counting_many_accesses_per_group_finishes():
    # Regression: freeing the counters' memory on a worker thread made glibc trim its arena,
    # which opens a /proc file the lockdown forbids; the fault handler then deadlocked (timeout).
    n = 1536
    a = np.ones(n * n, np.float32)
    run = RawKernel(GEMM, "gemm8").launch((4, 1, 1), (8, 8, 1), [a, a.copy(), np.zeros_like(a),
                                                                  np.int32(n)], count=True)
    assert run.ok, run.findings
    # per warp and k: As[ty][k] (4 rows, 4 banks) and Bs[k][tx] (8 words): one wavefront each
    assert run.counters["shared_load_wavefronts"] == 4 * 2 * n * 2
