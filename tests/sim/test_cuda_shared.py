"""cuda_sim shared memory and block barriers: static and dynamic __shared__, __syncthreads and its
counting/and/or forms, __syncwarp."""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel

REDUCE_CODE = r"""
extern "C" __global__ void block_sum(const int* x, int* sums) {
  __shared__ int partial[128];
  int t = threadIdx.x;
  partial[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) sums[blockIdx.x] = partial[0];
}
"""


def test_static_shared_1d_tree_reduction():
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, size=4 * 128, dtype=np.int32)
    sums = np.zeros(4, dtype=np.int32)
    RawKernel(REDUCE_CODE, "block_sum")((4,), (128,), (x, sums))
    np.testing.assert_array_equal(sums, x.reshape(4, 128).sum(axis=1))


TRANSPOSE_CODE = r"""
#define TILE 8
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];  // padded against bank conflicts
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  if (x < rows && y < cols) out[y * rows + x] = tile[threadIdx.x][threadIdx.y];
}
"""


@pytest.mark.parametrize("rows, cols", [(16, 24), (13, 5)])
def test_static_shared_2d_padded_transpose(rows, cols):
    a = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) * 0.5
    out = np.zeros((cols, rows), dtype=np.float32)
    grid = ((cols + 7) // 8, (rows + 7) // 8)
    RawKernel(TRANSPOSE_CODE, "transpose")(grid, (8, 8), (a, out, np.int32(rows), np.int32(cols)))
    np.testing.assert_array_equal(out, a.T)


def test_static_shared_2d_neighbour_exchange_in_2d_block():
    code = r"""
    extern "C" __global__ void rotate(const int* in, int* out) {
      __shared__ int grid2d[4][16];
      int tx = threadIdx.x, ty = threadIdx.y, base = blockIdx.x * 64;
      grid2d[ty][tx] = in[base + ty * 16 + tx];
      __syncthreads();
      out[base + ty * 16 + tx] = grid2d[(ty + 1) % 4][15 - tx];
    }"""
    x = np.arange(128, dtype=np.int32) * 3
    out = np.zeros_like(x)
    RawKernel(code, "rotate")((2,), (16, 4), (x, out))
    blocks = x.reshape(2, 4, 16)
    expected = np.roll(blocks, -1, axis=1)[:, :, ::-1]
    np.testing.assert_array_equal(out, expected.ravel())


def test_shared_arrays_are_private_to_each_block():
    code = r"""
    extern "C" __global__ void own(int* out) {
      __shared__ int mark;
      if (threadIdx.x == 0) mark = blockIdx.x * 10;
      __syncthreads();
      out[blockIdx.x * blockDim.x + threadIdx.x] = mark + threadIdx.x;
    }"""
    out = np.zeros(6 * 32, dtype=np.int32)
    RawKernel(code, "own")((6,), (32,), (out,))
    np.testing.assert_array_equal(out.reshape(6, 32),
                                  np.arange(6)[:, None] * 10 + np.arange(32)[None, :])


DYNAMIC_CODE = r"""
extern "C" __global__ void reverse_blocks(const float* in, float* out) {
  extern __shared__ float buf[];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  buf[t] = in[base + t];
  __syncthreads();
  out[base + t] = buf[blockDim.x - 1 - t];
}
"""


@pytest.mark.parametrize("threads", [32, 96, 256])
def test_extern_shared_sized_by_shared_mem(threads):
    x = np.arange(3 * threads, dtype=np.float32)
    out = np.zeros_like(x)
    RawKernel(DYNAMIC_CODE, "reverse_blocks")((3,), (threads,), (x, out), shared_mem=threads * 4)
    np.testing.assert_array_equal(out, x.reshape(3, threads)[:, ::-1].ravel())


def test_two_arrays_carved_from_one_dynamic_buffer():
    code = r"""
    extern "C" __global__ void carve(const float* v, const int* k, float* out, int n) {
      extern __shared__ unsigned char smem[];
      float* values = reinterpret_cast<float*>(smem);
      int* keys = reinterpret_cast<int*>(values + n);
      int t = threadIdx.x;
      values[t] = v[t];
      keys[t] = k[t];
      __syncthreads();
      out[t] = values[keys[t]] * 2.0f + (float)keys[n - 1 - t];
    }"""
    n = 64
    rng = np.random.default_rng(2)
    v = rng.integers(-50, 50, size=n).astype(np.float32)
    k = rng.permutation(n).astype(np.int32)
    out = np.zeros(n, dtype=np.float32)
    RawKernel(code, "carve")((1,), (n,), (v, k, out, np.int32(n)), shared_mem=8 * n)
    np.testing.assert_array_equal(out, v[k] * 2 + k[::-1])


def test_dynamic_shared_read_past_shared_mem_is_reported():
    code = r"""
    extern "C" __global__ void overrun(float* out) {
      extern __shared__ float buf[];
      buf[threadIdx.x] = 1.0f;
      __syncthreads();
      out[threadIdx.x] = buf[threadIdx.x + 1];
    }"""
    run = RawKernel(code, "overrun").launch((1,), (32,), (np.zeros(32, np.float32),),
                                            shared_mem=32 * 4)
    assert run.compiled and not run.ok
    assert any(f.kind == "out_of_bounds" and f.line == 6 for f in run.findings)


SYNC_PRED_CODE = r"""
extern "C" __global__ void votes(const int* x, int* out, int threshold) {
  int v = x[blockIdx.x * blockDim.x + threadIdx.x];
  int count = __syncthreads_count(v > threshold);
  int all = __syncthreads_and(v > threshold);
  int any = __syncthreads_or(v > threshold);
  if (threadIdx.x == 0) {
    out[3 * blockIdx.x] = count;
    out[3 * blockIdx.x + 1] = all != 0;
    out[3 * blockIdx.x + 2] = any != 0;
  }
}
"""


@pytest.mark.parametrize("threads", [64, 100])
def test_syncthreads_count_and_or(threads):
    rng = np.random.default_rng(threads)
    x = np.stack([np.full(threads, 5), rng.integers(0, 10, threads), np.zeros(threads),
                  np.arange(threads) % 2 + 4]).astype(np.int32)
    out = np.full(3 * 4, -1, dtype=np.int32)
    RawKernel(SYNC_PRED_CODE, "votes")((4,), (threads,), (x, out, np.int32(3)))
    pred = x > 3
    expected = np.stack([pred.sum(axis=1), pred.all(axis=1), pred.any(axis=1)], axis=1)
    np.testing.assert_array_equal(out.reshape(4, 3), expected)


def test_syncwarp_orders_warp_shared_memory():
    code = r"""
    extern "C" __global__ void mirror(const int* in, int* out) {
      __shared__ int s[64];
      int t = threadIdx.x, lane = t % 32, warp = t / 32;
      s[t] = in[t] * 2;
      __syncwarp();
      out[t] = s[warp * 32 + (31 - lane)];
    }"""
    x = np.arange(64, dtype=np.int32) ** 2
    out = np.zeros_like(x)
    RawKernel(code, "mirror")((1,), (64,), (x, out))
    np.testing.assert_array_equal(out, (2 * x).reshape(2, 32)[:, ::-1].ravel())


def test_missing_syncthreads_is_reported_as_a_race():
    code = r"""
    extern "C" __global__ void racy(int* out) {
      __shared__ int s[64];
      s[threadIdx.x] = threadIdx.x;
      out[threadIdx.x] = s[63 - threadIdx.x];
    }"""
    run = RawKernel(code, "racy").launch((1,), (64,), (np.zeros(64, np.int32),))
    assert run.compiled and not run.ok
    assert any(f.kind == "race" and f.line == 5 for f in run.findings)


def test_static_shared_over_48_kib_is_a_limit_finding():
    code = r"""
    extern "C" __global__ void big(float* out) {
      __shared__ float s[13000];
      s[threadIdx.x] = 1.0f;
      __syncthreads();
      out[threadIdx.x] = s[threadIdx.x];
    }"""
    run = RawKernel(code, "big").launch((1,), (32,), (np.zeros(32, np.float32),))
    assert run.compiled and not run.ok
    assert run.findings[0].kind == "limit" and run.findings[0].line == 3
    assert "52000 bytes" in run.findings[0].message


@pytest.mark.parametrize("other_branch", ["", "else { __syncthreads(); }"])
def test_barrier_in_divergent_code_is_reported(other_branch):
    code = r"""
    extern "C" __global__ void diverge(float* out) {
      if (threadIdx.x < 16) { __syncthreads(); }
      OTHER
      out[threadIdx.x] = 1.0f;
    }""".replace("OTHER", other_branch)
    run = RawKernel(code, "diverge").launch((1,), (32,), (np.zeros(32, np.float32),))
    assert run.compiled and not run.ok
    assert run.findings[0].kind == "divergence" and run.findings[0].line == 3
