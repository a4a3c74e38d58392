"""cuda_sim nvcuda::wmma (m16n16k16, half inputs): GEMMs checked against numpy, and the rule
that every lane of the warp takes part in the fragment collectives."""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel

# Warp w of a block computes the 16x16 tile (blockIdx.y, blockIdx.x * warps + w) of D = A B + C:
# A (M x K) row-major, B given as B^T (N x K) and read col_major, C and D column-major in and
# row-major out. Each warp stages its tiles through shared memory, so the kernel has barriers.
GEMM_CODE = r"""
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void wmma_gemm(const half* __restrict__ A, const half* __restrict__ Bt,
                                     const float* __restrict__ C, float* __restrict__ D,
                                     int M, int N, int K) {
  __shared__ __align__(32) half As[2][16 * 16], Bs[2][16 * 16];
  int w = threadIdx.y, lane = threadIdx.x;
  int tm = blockIdx.y, tn = blockIdx.x * blockDim.y + w;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(acc, C + tm * 16 + tn * 16 * M, M, wmma::mem_col_major);
  for (int k = 0; k < K; k += 16) {
    for (int i = lane; i < 256; i += 32) {
      As[w][i] = A[(tm * 16 + i / 16) * K + k + i % 16];
      Bs[w][i] = Bt[(tn * 16 + i / 16) * K + k + i % 16];
    }
    __syncthreads();
    wmma::load_matrix_sync(a, As[w], 16);
    wmma::load_matrix_sync(b, Bs[w], 16);
    wmma::mma_sync(acc, a, b, acc);
    __syncthreads();
  }
  wmma::store_matrix_sync(D + tm * 16 * N + tn * 16, acc, N, wmma::mem_row_major);
}
"""


@pytest.mark.parametrize("size, warps", [(16, 1), (32, 2)])
def test_wmma_gemm_matches_numpy(size, warps):
    rng = np.random.default_rng(size)
    a = rng.standard_normal((size, size)).astype(np.float16)
    bt = rng.standard_normal((size, size)).astype(np.float16)
    c = rng.standard_normal((size, size)).astype(np.float32)  # column-major: c[j, i] is C[i, j]
    d = np.full((size, size), np.nan, dtype=np.float32)
    tiles = size // 16
    run = RawKernel(GEMM_CODE, "wmma_gemm").launch(
        (tiles // warps, tiles), (32, warps), (a, bt, c, d, *(np.int32(size),) * 3)
    )
    assert run.ok, run.findings or run.diagnostics
    want = a.astype(np.float64) @ bt.astype(np.float64).T + c.T
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5)


PARTIAL_WARP_CODE = r"""
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void half_warp(const half* A, float* D) {
  __shared__ __align__(32) half As[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) As[i] = A[i];
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(a, As, 16);
  wmma::load_matrix_sync(b, As, 16);
  wmma::mma_sync(acc, a, b, acc);
  wmma::store_matrix_sync(D, acc, 16, wmma::mem_row_major);
}
"""


def test_wmma_with_a_partial_warp_is_divergence():
    a = np.ones((16, 16), dtype=np.float16)
    d = np.zeros((16, 16), dtype=np.float32)
    run = RawKernel(PARTIAL_WARP_CODE, "half_warp").launch((1,), (16,), (a, d))
    kinds = {(f.kind, f.line) for f in run.findings}
    assert ("divergence", 12) in kinds and ("divergence", 14) in kinds, run.findings


DIRECT_CODE = r"""
#include <mma.h>
extern "C" __global__ void direct(const half* A, const half* B, float* D) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> a;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::row_major> b;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc;
  nvcuda::wmma::fill_fragment(acc, 0.0f);
  nvcuda::wmma::load_matrix_sync(a, A, 16);
  nvcuda::wmma::load_matrix_sync(b, B, 16);
  nvcuda::wmma::mma_sync(acc, a, b, acc);
  nvcuda::wmma::store_matrix_sync(D, acc, 16, nvcuda::wmma::mem_row_major);
}
"""


def test_wmma_straight_from_global_memory():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    d = np.zeros((16, 16), dtype=np.float32)
    run = RawKernel(DIRECT_CODE, "direct").launch((1,), (32,), (a, b, d))
    assert run.ok, run.findings
    np.testing.assert_allclose(d, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
