"""The runner conformance suite: CUDA kernels every CUDA runner must run alike.

Each case carries its kernel, launch, input maker and an independent numpy reference. The test
suite runs them through every runner on the machine (cuda_sim everywhere, cuda_gpu on NVIDIA);
`python -m evals.fidelity` runs them on both and writes the agreement table of docs/fidelity.md.
The Metal cases (metal_sim everywhere, mlx_metal on Apple Silicon) live in
evals/conformance_metal.py; this module needs only numpy, so it also runs on GPU machines
without MLX.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from runners.base import LaunchRecord, Runner


@dataclass(frozen=True)
class CudaCase:
    name: str
    code: str
    kernel: str
    grid: tuple
    block: tuple
    make: Callable[[np.random.Generator], list]  # kernel arguments in order
    expect: Callable[[list], dict[int, np.ndarray]]  # reference outputs by argument index
    shared_mem: int = 0
    rtol: float = 1e-5
    atol: float = 1e-6
    # The kernel has undefined behaviour the simulator must report; its outputs are compared
    # with the reference only on real hardware (docs/fidelity.md records what the GPU did).
    expect_findings: bool = False


def _f32(rng, n):
    return rng.standard_normal(n).astype(np.float32)


ELEMENTWISE = r"""
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}"""

GELU_HALF = r"""
#include <cuda_fp16.h>
extern "C" __global__ void gelu_h(const __half* x, __half* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = __half2float(x[i]);
  y[i] = __float2half(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
}"""

BLOCK_REDUCE = r"""
template <int BLOCK>
__global__ void block_sum(const float* __restrict__ x, float* out, int n) {
  __shared__ float warp_sums[BLOCK / 32];
  int i = blockIdx.x * BLOCK + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < BLOCK / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
  }
}"""

ATOMIC_HIST = r"""
extern "C" __global__ void hist(const int* x, unsigned* bins, int n) {
  __shared__ unsigned local[16];
  if (threadIdx.x < 16) local[threadIdx.x] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&local[x[i] & 15], 1u);
  __syncthreads();
  if (threadIdx.x < 16) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}"""

TRANSPOSE = r"""
#define TILE 32
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += blockDim.y)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x; y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += blockDim.y)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}"""

SCAN = r"""
extern "C" __global__ void warp_scan(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  int v = i < n ? x[i] : 0;
  for (int d = 1; d < 32; d <<= 1) {
    int t = __shfl_up_sync(0xffffffff, v, d);
    if (lane >= d) v += t;
  }
  if (i < n) y[i] = v;
}"""

SOFTMAX = r"""
extern "C" __global__ void softmax(const float* x, float* y, int n) {
  extern __shared__ float red[];
  const float* row = x + blockIdx.x * n;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, row[i]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < blockDim.x / 32; w++) m = fmaxf(m, red[w]);
  __syncthreads();
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += expf(row[i] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = s;
  __syncthreads();
  s = 0.0f;
  for (int w = 0; w < blockDim.x / 32; w++) s += red[w];
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[blockIdx.x * n + i] = expf(row[i] - m) / s;
}"""

MATMUL = r"""
#define T 16
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[T][T], Bs[T][T];
  int r = blockIdx.y * T + threadIdx.y, c = blockIdx.x * T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (r < M && ka < K) ? A[r * K + ka] : 0;
    Bs[threadIdx.y][threadIdx.x] = (c < N && kb < K) ? B[kb * N + c] : 0;
    __syncthreads();
    for (int k = 0; k < T; k++) acc = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
    __syncthreads();
  }
  if (r < M && c < N) C[r * N + c] = acc;
}"""

INT_INTRINSICS = r"""
extern "C" __global__ void bits(const unsigned* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  out[4 * i + 0] = __popc(v);
  out[4 * i + 1] = __clz(v);
  out[4 * i + 2] = __ffs(v);
  out[4 * i + 3] = (int)__brev(v);
}"""

VOTES = r"""
extern "C" __global__ void votes(const float* x, unsigned* out) {
  int lane = threadIdx.x & 31, warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  bool p = x[blockIdx.x * blockDim.x + threadIdx.x] > 0.0f;
  unsigned b = __ballot_sync(0xffffffff, p);
  int any = __any_sync(0xffffffff, p), all = __all_sync(0xffffffff, p);
  int cnt = __syncthreads_count(p);
  if (lane == 0) { out[4 * warp] = b; out[4 * warp + 1] = any; out[4 * warp + 2] = all;
                   out[4 * warp + 3] = cnt; }
}"""

CONVERSIONS = r"""
extern "C" __global__ void conv(const float* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[4 * i + 0] = __float2int_rn(x[i]);
  out[4 * i + 1] = __float2int_rz(x[i]);
  out[4 * i + 2] = __float2int_rd(x[i]);
  out[4 * i + 3] = __float2int_ru(x[i]);
}"""

SEGMENT_SHFL = r"""
extern "C" __global__ void seg(const float* x, float* out) {
  int i = threadIdx.x;
  float v = x[i];
  out[4 * i + 0] = __shfl_down_sync(0xffffffff, v, 3, 8);
  out[4 * i + 1] = __shfl_up_sync(0xffffffff, v, 5, 16);
  out[4 * i + 2] = __shfl_xor_sync(0xffffffff, v, 6, 8);
  out[4 * i + 3] = __shfl_sync(0xffffffff, v, i + 9, 16);
}"""

BF16_ROUND = r"""
#include <cuda_bf16.h>
extern "C" __global__ void bf(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __bfloat162float(__float2bfloat16(x[i]) * __float2bfloat16(3.0f));
}"""

EARLY_EXIT_BARRIER = r"""
extern "C" __global__ void early(const float* x, float* y, int n) {
  __shared__ float s[64];
  int t = threadIdx.x;
  if (t >= n) return;            // partial exit before a barrier: undefined, common in the wild
  s[t] = x[t];
  __syncthreads();
  y[t] = s[(t + 1) % n];
}"""

FAST_MATH = r"""
extern "C" __global__ void fastmath(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[4 * i + 0] = __expf(x[i]);
  y[4 * i + 1] = __logf(fabsf(x[i]) + 1e-3f);
  y[4 * i + 2] = __fdividef(x[i], 3.0f);
  y[4 * i + 3] = rsqrtf(fabsf(x[i]) + 1e-3f);
}"""

PARTIAL_WARP = r"""
extern "C" __global__ void partial(const float* x, float* y) {
  float v = x[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(__activemask(), v, o);
  y[threadIdx.x] = v;
}"""

HALF2_MATH = r"""
#include <cuda_fp16.h>
extern "C" __global__ void h2(const __half2* a, const __half2* b, __half2* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = __hfma2(a[i], b[i], __hmul2(a[i], a[i]));
}"""

HALF_CONVERT = r"""
#include <cuda_fp16.h>
extern "C" __global__ void hconv(const float* x, __half* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(x[i]);
}"""

INT_DIVISION = r"""
extern "C" __global__ void idiv(const int* a, const int* b, int* q, int* r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { q[i] = a[i] / b[i]; r[i] = a[i] % b[i]; }
}"""


def _bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even) and back, NaN kept."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32)


def _bits_reference(x: np.ndarray) -> np.ndarray:
    out = np.zeros((x.size, 4), np.int64)
    for i, v in enumerate(x.tolist()):
        out[i] = [bin(v).count("1"), 32 - v.bit_length(), (v & -v).bit_length(),
                  int(f"{v:032b}"[::-1], 2)]
    return out.astype(np.uint32).view(np.int32).reshape(-1)


def _votes_reference(x: np.ndarray) -> np.ndarray:
    p = (x > 0).reshape(-1, 32)
    out = []
    blocks = p.reshape(-1, 4, 32)  # 128-thread blocks
    for w, lanes in enumerate(p):
        ballot = sum(1 << j for j in range(32) if lanes[j])
        out += [ballot, int(lanes.any()), int(lanes.all()), int(blocks[w // 4].sum())]
    return np.array(out, np.uint32)


def _segment_reference(x: np.ndarray) -> np.ndarray:
    out = np.zeros((32, 4), np.float32)
    for i in range(32):
        seg8, seg16 = i - i % 8, i - i % 16
        out[i, 0] = x[i + 3] if i % 8 + 3 < 8 else x[i]
        out[i, 1] = x[i - 5] if i % 16 >= 5 else x[i]
        out[i, 2] = x[seg8 + ((i % 8) ^ 6)]
        out[i, 3] = x[seg16 + (i + 9) % 16]
    return out.reshape(-1)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _gelu(x):
    v = x.astype(np.float32)
    return (0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v**3)))).astype(np.float16)


CASES: list[CudaCase] = [
    CudaCase("saxpy_awkward_n", ELEMENTWISE, "saxpy", (4,), (256,),
             lambda r: [_f32(r, 997), _f32(r, 997), np.float32(2.5), np.int32(997)],
             lambda a: {1: 2.5 * a[0] + a[1]}),
    CudaCase("gelu_half", GELU_HALF, "gelu_h", (4,), (128,),
             lambda r: [_f32(r, 500).astype(np.float16), np.zeros(500, np.float16),
                        np.int32(500)],
             lambda a: {1: _gelu(a[0])}, rtol=2e-3, atol=2e-3),
    CudaCase("block_sum_shfl", BLOCK_REDUCE, "block_sum<256>", (7,), (256,),
             lambda r: [_f32(r, 1700), np.zeros(7, np.float32), np.int32(1700)],
             lambda a: {1: np.add.reduceat(np.pad(a[0], (0, 92)), np.arange(0, 1792, 256))},
             rtol=1e-4, atol=1e-4),
    CudaCase("atomic_histogram", ATOMIC_HIST, "hist", (8,), (128,),
             lambda r: [r.integers(0, 1000, 5003).astype(np.int32), np.zeros(16, np.uint32),
                        np.int32(5003)],
             lambda a: {1: np.bincount(a[0] & 15, minlength=16).astype(np.uint32)}),
    CudaCase("transpose_padded_tile", TRANSPOSE, "transpose", (3, 2), (32, 8),
             lambda r: [_f32(r, 45 * 70), np.zeros(45 * 70, np.float32), np.int32(45),
                        np.int32(70)],
             lambda a: {1: a[0].reshape(45, 70).T.reshape(-1)}),
    CudaCase("warp_inclusive_scan", SCAN, "warp_scan", (3,), (64,),
             lambda r: [r.integers(-50, 50, 150).astype(np.int32), np.zeros(150, np.int32),
                        np.int32(150)],
             lambda a: {1: np.concatenate([np.cumsum(c) for c in np.split(
                 np.pad(a[0], (0, 42)), 6)])[:150].astype(np.int32)}),
    CudaCase("softmax_dynamic_smem", SOFTMAX, "softmax", (5,), (128,),
             lambda r: [_f32(r, 5 * 333), np.zeros(5 * 333, np.float32), np.int32(333)],
             lambda a: {1: _softmax(a[0].reshape(5, 333)).reshape(-1)}, shared_mem=16,
             rtol=1e-4, atol=1e-6),
    CudaCase("tiled_matmul", MATMUL, "matmul", (3, 2), (16, 16),
             lambda r: [_f32(r, 23 * 37), _f32(r, 37 * 41), np.zeros(23 * 41, np.float32),
                        np.int32(23), np.int32(41), np.int32(37)],
             lambda a: {2: (a[0].reshape(23, 37) @ a[1].reshape(37, 41)).reshape(-1)},
             rtol=1e-4, atol=1e-4),
    CudaCase("integer_intrinsics", INT_INTRINSICS, "bits", (1,), (64,),
             lambda r: [np.concatenate([np.array([0, 1, 0x80000000, 0xFFFFFFFF], np.uint32),
                                        r.integers(0, 2**32, 60, dtype=np.uint64).astype(
                                            np.uint32)]), np.zeros(256, np.int32),
                        np.int32(64)],
             lambda a: {1: _bits_reference(a[0])}),
    CudaCase("ballot_any_all_count", VOTES, "votes", (2,), (128,),
             lambda r: [np.where(np.arange(256) % 7 == 0, -1.0, 1.0).astype(np.float32) *
                        np.where(np.arange(256) >= 224, -1, 1).astype(np.float32),
                        np.zeros(32, np.uint32)],
             lambda a: {1: _votes_reference(a[0])}),
    CudaCase("float_to_int_rounding", CONVERSIONS, "conv", (1,), (32,),
             lambda r: [np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1e10, -1e10, np.nan, 3.7, -3.7,
                                  2.49999, -2.5] + [0.0] * 20, np.float32),
                        np.zeros(128, np.int32), np.int32(32)],
             lambda a: {1: _conversions_reference(a[0])}),
    CudaCase("shfl_width_segments", SEGMENT_SHFL, "seg", (1,), (32,),
             lambda r: [_f32(r, 32), np.zeros(128, np.float32)],
             lambda a: {1: _segment_reference(a[0])}),
    CudaCase("bfloat16_rounding", BF16_ROUND, "bf", (2,), (128,),
             lambda r: [_f32(r, 200) * 100, np.zeros(200, np.float32), np.int32(200)],
             lambda a: {1: _bf16(_bf16(a[0]) * np.float32(3.0))}),
    CudaCase("early_exit_then_barrier", EARLY_EXIT_BARRIER, "early", (1,), (64,),
             lambda r: [_f32(r, 64), np.zeros(64, np.float32), np.int32(40)],
             lambda a: {1: np.concatenate([np.roll(a[0][:40], -1), np.zeros(24, np.float32)])},
             expect_findings=True),
    CudaCase("fast_math_intrinsics", FAST_MATH, "fastmath", (2,), (128,),
             lambda r: [_f32(r, 200) * 4, np.zeros(800, np.float32), np.int32(200)],
             lambda a: {1: np.stack([np.exp(a[0]), np.log(np.abs(a[0]) + 1e-3), a[0] / 3,
                                     1 / np.sqrt(np.abs(a[0]) + 1e-3)], 1).reshape(-1)},
             rtol=1e-5, atol=2e-6),
    CudaCase("partial_warp_xor_reduce", PARTIAL_WARP, "partial", (1,), (48,),
             lambda r: [_f32(r, 48), np.zeros(48, np.float32)],
             lambda a: {1: np.concatenate([np.full(32, a[0][:32].sum()),
                                           np.full(16, a[0][32:].sum())]).astype(np.float32)},
             rtol=1e-5, atol=1e-5, expect_findings=True),
    CudaCase("half2_fma", HALF2_MATH, "h2", (1,), (128,),
             lambda r: [_f32(r, 256).astype(np.float16), _f32(r, 256).astype(np.float16),
                        np.zeros(256, np.float16), np.int32(128)],
             lambda a: {2: (a[0].astype(np.float32) * a[1] + (a[0] * a[0]).astype(
                 np.float32)).astype(np.float16)}, rtol=2e-3, atol=2e-3),
    CudaCase("float_to_half_edges", HALF_CONVERT, "hconv", (1,), (32,),
             lambda r: [np.array([65504, 65519, 65520, 1e6, -1e6, 6e-8, 3e-8, 2.9e-8, np.nan,
                                  np.inf, 1 / 3, -0.0] + [1.0] * 20, np.float32),
                        np.zeros(32, np.float16), np.int32(32)],
             lambda a: {1: a[0].astype(np.float16)}, rtol=0, atol=0),
    CudaCase("integer_division_signs", INT_DIVISION, "idiv", (1,), (32,),
             lambda r: [r.integers(-1000, 1000, 32).astype(np.int32),
                        np.where(r.integers(0, 2, 32) == 0, -1, 1).astype(np.int32) *
                        r.integers(1, 30, 32).astype(np.int32),
                        np.zeros(32, np.int32), np.zeros(32, np.int32), np.int32(32)],
             lambda a: {2: (np.trunc(a[0] / a[1])).astype(np.int32),
                        3: (a[0] - np.trunc(a[0] / a[1]).astype(np.int32) * a[1])}),
]


def _conversions_reference(x: np.ndarray) -> np.ndarray:
    """PTX cvt.rni/rzi/rmi/rpi.s32.f32: saturate to int32, NaN -> 0."""
    def sat(v):
        if np.isnan(v):
            return 0
        return int(min(max(v, -(2**31)), 2**31 - 1))

    out = []
    for v in x.astype(np.float64):
        out += [sat(np.rint(v)), sat(np.trunc(v)), sat(np.floor(v)), sat(np.ceil(v))]
    return np.array(out, np.int64).astype(np.int32)


def run_case(case: CudaCase, runner: Runner, seed: int = 0,
             args: list | None = None) -> tuple[list, list, LaunchRecord]:
    """Run ``case`` on a CUDA runner (``runners.get(name)``) with fresh inputs from ``seed``
    (or ``args``). Returns (inputs as they were, arguments after the run, the runner's record)."""
    args = case.make(np.random.default_rng(seed)) if args is None else args
    inputs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kernel = runner.kernel(case.code, case.kernel)
    record = kernel.launch(case.grid, case.block, args, shared_mem=case.shared_mem)
    return inputs, args, record
