// LayerNorm backward, input gradient, half activations with float statistics (mixed precision):
//   g = dy * gamma,  xhat = (x - mean) * rstd
//   dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat))
// One block per row; both row sums are reduced together (warp shuffles, then shared memory).
#include <cuda_fp16.h>

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
layernorm_backward_dx(const __half* __restrict__ x, const __half* __restrict__ dy,
                      const float* __restrict__ gamma, const float* __restrict__ mean,
                      const float* __restrict__ rstd, __half* __restrict__ dx, int n) {
  constexpr int kWarps = BLOCK / 32;
  __shared__ float2 warp_sums[kWarps];
  const int row = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const __half* __restrict__ xr = x + (size_t)row * n;
  const __half* __restrict__ dyr = dy + (size_t)row * n;
  __half* __restrict__ dxr = dx + (size_t)row * n;
  const float mu = mean[row], rs = rstd[row];

  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int i = threadIdx.x; i < n; i += BLOCK) {
    float g = __half2float(dyr[i]) * gamma[i];
    float xhat = (__half2float(xr[i]) - mu) * rs;
    sum_g += g;
    sum_gx += g * xhat;
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    sum_g += __shfl_xor_sync(0xffffffffu, sum_g, off);
    sum_gx += __shfl_xor_sync(0xffffffffu, sum_gx, off);
  }
  if (lane == 0) warp_sums[warp] = make_float2(sum_g, sum_gx);
  __syncthreads();
  sum_g = 0.0f;
  sum_gx = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    sum_g += warp_sums[w].x;
    sum_gx += warp_sums[w].y;
  }
  const float inv_n = 1.0f / n;
  const float mean_g = sum_g * inv_n, mean_gx = sum_gx * inv_n;

  for (int i = threadIdx.x; i < n; i += BLOCK) {
    float g = __half2float(dyr[i]) * gamma[i];
    float xhat = (__half2float(xr[i]) - mu) * rs;
    dxr[i] = __float2half(rs * (g - mean_g - xhat * mean_gx));
  }
}
