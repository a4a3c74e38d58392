// Tensor-core GEMM C = A B with half inputs and float accumulation (nvcuda::wmma, m16n16k16).
// A block of 4 warps computes a 32 x 32 tile of C, each warp one 16 x 16 quarter. Per 16-deep
// step the block stages A (32 x 16) and B (16 x 32) in shared memory, zero-filled past the
// edges; rows are padded by 8 halves (16 bytes), which keeps every fragment pointer 32-byte
// aligned and ldm a multiple of 8. The result goes through shared memory so that partial edge
// tiles can be written with bounds checks.
#include <mma.h>
using namespace nvcuda;

constexpr int kTile = 32, kStep = 16, kPadH = 8, kPadF = 4;

extern "C" __global__ void __launch_bounds__(128)
gemm_wmma_half(const half* __restrict__ A, const half* __restrict__ B, float* __restrict__ C,
               int M, int N, int K) {
  __shared__ __align__(32) half As[kTile][kStep + kPadH];
  __shared__ __align__(32) half Bs[kStep][kTile + kPadH];
  __shared__ __align__(32) float Cs[kTile][kTile + kPadF];
  const int tid = threadIdx.x, warp = tid / 32;
  const int wr = (warp / 2) * 16, wc = (warp % 2) * 16;  // this warp's quarter of the tile
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;

  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);

  const half zero = __float2half(0.0f);
  for (int k0 = 0; k0 < K; k0 += kStep) {
    for (int i = tid; i < kTile * kStep; i += 128) {
      const int r = i / kStep, c = i % kStep;
      As[r][c] = (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : zero;
      const int br = i / kTile, bc = i % kTile;
      Bs[br][bc] = (k0 + br < K && col0 + bc < N) ? B[(size_t)(k0 + br) * N + col0 + bc] : zero;
    }
    __syncthreads();
    wmma::load_matrix_sync(a, &As[wr][0], kStep + kPadH);
    wmma::load_matrix_sync(b, &Bs[0][wc], kTile + kPadH);
    wmma::mma_sync(acc, a, b, acc);
    __syncthreads();
  }
  wmma::store_matrix_sync(&Cs[wr][wc], acc, kTile + kPadF, wmma::mem_row_major);
  __syncthreads();
  for (int i = tid; i < kTile * kTile; i += 128) {
    const int r = i / kTile, c = i % kTile;
    if (row0 + r < M && col0 + c < N) C[(size_t)(row0 + r) * N + col0 + c] = Cs[r][c];
  }
}
