// LayerNorm backward, parameter gradients: column sums over the rows of the batch
//   dgamma[j] = sum_r dy[r,j] * (x[r,j] - mean[r]) * rstd[r],   dbeta[j] = sum_r dy[r,j]
// A block owns 32 columns: threadIdx.x walks the columns (coalesced), threadIdx.y strides over
// the rows; the ROWS_Y partial sums per column are then tree-reduced in padded shared memory.
#include <cuda_fp16.h>

template <int ROWS_Y>
__global__ void __launch_bounds__(32 * ROWS_Y)
layernorm_backward_dgamma_dbeta(const __half* __restrict__ x, const __half* __restrict__ dy,
                                const float* __restrict__ mean, const float* __restrict__ rstd,
                                float* __restrict__ dgamma, float* __restrict__ dbeta,
                                int rows, int n) {
  __shared__ float s_dg[ROWS_Y][33];  // +1 column: no bank conflicts on the column-wise reads
  __shared__ float s_db[ROWS_Y][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int col = blockIdx.x * 32 + tx;

  float dg = 0.0f, db = 0.0f;
  if (col < n) {
    for (int r = ty; r < rows; r += ROWS_Y) {
      const size_t i = (size_t)r * n + col;
      const float g = __half2float(dy[i]);
      dg += g * (__half2float(x[i]) - mean[r]) * rstd[r];
      db += g;
    }
  }
  s_dg[ty][tx] = dg;
  s_db[ty][tx] = db;
  __syncthreads();
#pragma unroll
  for (int stride = ROWS_Y / 2; stride > 0; stride >>= 1) {
    if (ty < stride) {
      s_dg[ty][tx] += s_dg[ty + stride][tx];
      s_db[ty][tx] += s_db[ty + stride][tx];
    }
    __syncthreads();
  }
  if (ty == 0 && col < n) {
    dgamma[col] = s_dg[0][tx];
    dbeta[col] = s_db[0][tx];
  }
}
