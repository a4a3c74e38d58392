"""The six kernels of the simulator benchmark (evals/bench_sim.py), each written for cuda_sim
(CUDA), metal_sim (an MLX body) and PoCL (OpenCL C), with its inputs and numpy's answer.

Every kernel takes its input arrays, then the output, then int32 scalars, in that order, in all
three languages; the MLX body names its output `y`. Sizes are exact multiples of the tiles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TILE = 16  # matmul tile
ROW = 256  # threads of a reduction, softmax or scan group
HEAD_DIM = 32  # FlashAttention: head size = query rows = key rows of a tile

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
    "softmax": r"""extern "C" __global__ void softmax(const float* x, float* y, int d) {
  __shared__ float s[256];
  int t = threadIdx.x;
  const float* row = x + blockIdx.x * d;
  float m = -3.0e38f, sum = 0.0f;
  for (int i = t; i < d; i += 256) m = fmaxf(m, row[i]);
  s[t] = m; __syncthreads();
  for (int k = 128; k > 0; k >>= 1) { if (t < k) s[t] = fmaxf(s[t], s[t + k]); __syncthreads(); }
  m = s[0]; __syncthreads();
  for (int i = t; i < d; i += 256) sum += expf(row[i] - m);
  s[t] = sum; __syncthreads();
  for (int k = 128; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  float inv = 1.0f / s[0];
  for (int i = t; i < d; i += 256) y[blockIdx.x * d + i] = expf(row[i] - m) * inv; }""",
    "scan": r"""extern "C" __global__ void scan(const float* x, float* y) {
  __shared__ float s[256];
  int t = threadIdx.x, i = blockIdx.x * 256 + t;
  s[t] = x[i]; __syncthreads();
  for (int off = 1; off < 256; off <<= 1) {
    float v = t >= off ? s[t - off] : 0.0f; __syncthreads();
    s[t] += v; __syncthreads(); }
  y[i] = s[t]; }""",
    "flash_attn": r"""extern "C" __global__ void attn(const float* q, const float* k,
                                 const float* v, float* o, int n) {
  __shared__ float ks[32][32], vs[32][32];
  int t = threadIdx.x, row = blockIdx.x * 32 + t, base = blockIdx.y * n * 32;
  float qr[32], acc[32], sc[32], m = -3.0e38f, l = 0.0f;
  for (int c = 0; c < 32; c++) {
    qr[c] = q[base + row * 32 + c] * 0.17677669529663687f; acc[c] = 0.0f; }
  for (int j0 = 0; j0 < n; j0 += 32) {
    for (int c = 0; c < 32; c++) {
      ks[t][c] = k[base + (j0 + t) * 32 + c]; vs[t][c] = v[base + (j0 + t) * 32 + c]; }
    __syncthreads();
    float mt = m;
    for (int j = 0; j < 32; j++) {
      float a = 0.0f;
      for (int c = 0; c < 32; c++) a += qr[c] * ks[j][c];
      sc[j] = a; mt = fmaxf(mt, a); }
    float corr = expf(m - mt); l *= corr;
    for (int c = 0; c < 32; c++) acc[c] *= corr;
    for (int j = 0; j < 32; j++) {
      float p = expf(sc[j] - mt); l += p;
      for (int c = 0; c < 32; c++) acc[c] += p * vs[j][c]; }
    m = mt;
    __syncthreads(); }
  for (int c = 0; c < 32; c++) o[base + row * 32 + c] = acc[c] / l; }""",
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
    "softmax": """threadgroup float s[256];
int t = thread_position_in_threadgroup.x;
int g = threadgroup_position_in_grid.x;
float m = -3.0e38f, sum = 0.0f;
for (int i = t; i < d; i += 256) m = fmax(m, x[g * d + i]);
s[t] = m;
threadgroup_barrier(mem_flags::mem_threadgroup);
for (int k = 128; k > 0; k >>= 1) {
  if (t < k) s[t] = fmax(s[t], s[t + k]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
m = s[0];
threadgroup_barrier(mem_flags::mem_threadgroup);
for (int i = t; i < d; i += 256) sum += exp(x[g * d + i] - m);
s[t] = sum;
threadgroup_barrier(mem_flags::mem_threadgroup);
for (int k = 128; k > 0; k >>= 1) {
  if (t < k) s[t] += s[t + k];
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
float inv = 1.0f / s[0];
for (int i = t; i < d; i += 256) y[g * d + i] = exp(x[g * d + i] - m) * inv;""",
    "scan": """threadgroup float s[256];
uint t = thread_position_in_threadgroup.x, i = thread_position_in_grid.x;
s[t] = x[i];
threadgroup_barrier(mem_flags::mem_threadgroup);
for (uint off = 1; off < 256; off <<= 1) {
  float v = t >= off ? s[t - off] : 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  s[t] += v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
y[i] = s[t];""",
    "flash_attn": """threadgroup float ks[32][32];
threadgroup float vs[32][32];
int t = thread_position_in_threadgroup.x;
int row = threadgroup_position_in_grid.x * 32 + t, base = threadgroup_position_in_grid.y * n * 32;
float qr[32], acc[32], sc[32], m = -3.0e38f, l = 0.0f;
for (int c = 0; c < 32; c++) {
    qr[c] = q[base + row * 32 + c] * 0.17677669529663687f; acc[c] = 0.0f; }
for (int j0 = 0; j0 < n; j0 += 32) {
  for (int c = 0; c < 32; c++) {
    ks[t][c] = k[base + (j0 + t) * 32 + c];
    vs[t][c] = v[base + (j0 + t) * 32 + c];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float mt = m;
  for (int j = 0; j < 32; j++) {
    float a = 0.0f;
    for (int c = 0; c < 32; c++) a += qr[c] * ks[j][c];
    sc[j] = a;
    mt = fmax(mt, a);
  }
  float corr = exp(m - mt);
  l *= corr;
  for (int c = 0; c < 32; c++) acc[c] *= corr;
  for (int j = 0; j < 32; j++) {
    float p = exp(sc[j] - mt);
    l += p;
    for (int c = 0; c < 32; c++) acc[c] += p * vs[j][c];
  }
  m = mt;
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
for (int c = 0; c < 32; c++) y[base + row * 32 + c] = acc[c] / l;""",
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
__kernel void softmax(__global const float* x, __global float* y, int d) {
  __local float s[256];
  int t = get_local_id(0), g = get_group_id(0);
  float m = -3.0e38f, sum = 0.0f;
  for (int i = t; i < d; i += 256) m = fmax(m, x[g * d + i]);
  s[t] = m; barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = 128; k > 0; k >>= 1) {
    if (t < k) s[t] = fmax(s[t], s[t + k]); barrier(CLK_LOCAL_MEM_FENCE); }
  m = s[0]; barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = t; i < d; i += 256) sum += exp(x[g * d + i] - m);
  s[t] = sum; barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = 128; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; barrier(CLK_LOCAL_MEM_FENCE); }
  float inv = 1.0f / s[0];
  for (int i = t; i < d; i += 256) y[g * d + i] = exp(x[g * d + i] - m) * inv; }
__kernel void scan(__global const float* x, __global float* y) {
  __local float s[256];
  int t = get_local_id(0), i = get_global_id(0);
  s[t] = x[i]; barrier(CLK_LOCAL_MEM_FENCE);
  for (int off = 1; off < 256; off <<= 1) {
    float v = t >= off ? s[t - off] : 0.0f; barrier(CLK_LOCAL_MEM_FENCE);
    s[t] += v; barrier(CLK_LOCAL_MEM_FENCE); }
  y[i] = s[t]; }
__kernel void attn(__global const float* q, __global const float* k, __global const float* v,
                   __global float* o, int n) {
  __local float ks[32][32], vs[32][32];
  int t = get_local_id(0), row = get_group_id(0) * 32 + t, base = get_group_id(1) * n * 32;
  float qr[32], acc[32], sc[32], m = -3.0e38f, l = 0.0f;
  for (int c = 0; c < 32; c++) {
    qr[c] = q[base + row * 32 + c] * 0.17677669529663687f; acc[c] = 0.0f; }
  for (int j0 = 0; j0 < n; j0 += 32) {
    for (int c = 0; c < 32; c++) {
      ks[t][c] = k[base + (j0 + t) * 32 + c]; vs[t][c] = v[base + (j0 + t) * 32 + c]; }
    barrier(CLK_LOCAL_MEM_FENCE);
    float mt = m;
    for (int j = 0; j < 32; j++) {
      float a = 0.0f;
      for (int c = 0; c < 32; c++) a += qr[c] * ks[j][c];
      sc[j] = a; mt = fmax(mt, a); }
    float corr = exp(m - mt); l *= corr;
    for (int c = 0; c < 32; c++) acc[c] *= corr;
    for (int j = 0; j < 32; j++) {
      float p = exp(sc[j] - mt); l += p;
      for (int c = 0; c < 32; c++) acc[c] += p * vs[j][c]; }
    m = mt;
    barrier(CLK_LOCAL_MEM_FENCE); }
  for (int c = 0; c < 32; c++) o[base + row * 32 + c] = acc[c] / l; }
"""

# kernel -> (entry point in CUDA and OpenCL, MLX input names: arrays then scalars)
SIGNATURES = {
    "elementwise": ("ew", ("x", "n")),
    "reduction": ("red", ("x",)),
    "matmul": ("mm", ("a", "b", "n")),
    "softmax": ("softmax", ("x", "d")),
    "scan": ("scan", ("x",)),
    "flash_attn": ("attn", ("q", "k", "v", "n")),
}
NAMES = tuple(SIGNATURES)


@dataclass(frozen=True)
class BenchCase:
    """One kernel at one size: its arrays, int32 scalars, launch shape and numpy's answer."""

    name: str
    arrays: tuple[np.ndarray, ...]
    scalars: tuple[int, ...]
    groups: tuple[int, int, int]
    threads: tuple[int, int, int]
    want: np.ndarray

    @property
    def entry(self) -> str:
        return SIGNATURES[self.name][0]

    @property
    def grid(self) -> tuple[int, int, int]:
        """Threads per grid (MLX and OpenCL count threads, CUDA counts blocks)."""
        return tuple(g * t for g, t in zip(self.groups, self.threads, strict=True))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def make_case(name: str, rng: np.random.Generator, quick: bool) -> BenchCase:
    """The case of kernel `name` at the full benchmark size, or a small one when `quick`."""
    def normal(n: int) -> np.ndarray:
        return rng.standard_normal(n, dtype=np.float32)

    if name == "elementwise":
        n = 4096 if quick else 16 * 1024 * 1024
        x = normal(n)
        return BenchCase(name, (x,), (n,), (n // ROW, 1, 1), (ROW, 1, 1), x * 1.5 + 0.25)
    if name == "reduction":
        blocks = 8 if quick else 4096
        x = normal(blocks * ROW)
        want = x.astype(np.float64).reshape(blocks, ROW).sum(axis=1)
        return BenchCase(name, (x,), (), (blocks, 1, 1), (ROW, 1, 1), want)
    if name == "matmul":
        n = 32 if quick else 512
        a, b = normal(n * n), normal(n * n)
        want = (a.astype(np.float64).reshape(n, n) @ b.reshape(n, n)).reshape(-1)
        return BenchCase(name, (a, b), (n,), (n // TILE, n // TILE, 1), (TILE, TILE, 1), want)
    if name == "softmax":
        rows, d = (4, 512) if quick else (2048, 2048)
        x = normal(rows * d)
        want = _softmax(x.astype(np.float64).reshape(rows, d)).reshape(-1)
        return BenchCase(name, (x,), (d,), (rows, 1, 1), (ROW, 1, 1), want)
    if name == "scan":
        blocks = 8 if quick else 8192
        x = normal(blocks * ROW)
        want = np.cumsum(x.astype(np.float64).reshape(blocks, ROW), axis=1).reshape(-1)
        return BenchCase(name, (x,), (), (blocks, 1, 1), (ROW, 1, 1), want)
    if name == "flash_attn":
        heads, n = (2, 64) if quick else (4, 512)
        q, k, v = (normal(heads * n * HEAD_DIM) for _ in range(3))
        shaped = [a.astype(np.float64).reshape(heads, n, HEAD_DIM) for a in (q, k, v)]
        scores = shaped[0] @ shaped[1].transpose(0, 2, 1) / np.sqrt(HEAD_DIM)
        want = (_softmax(scores) @ shaped[2]).reshape(-1)
        return BenchCase(name, (q, k, v), (n,), (n // HEAD_DIM, heads, 1), (HEAD_DIM, 1, 1),
                         want)
    raise ValueError(f"unknown benchmark kernel {name!r}; choose one of {', '.join(NAMES)}")
