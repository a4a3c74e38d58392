// Fused residual-add + RMSNorm forward on fp16 activations (the decoder-layer pattern of
// vLLM-style inference engines), one block per token row, both updates in place:
//   residual <- half(x + residual)
//   x        <- half(residual * rsqrt(mean(residual^2) + eps) * weight)
// Statistics in fp32; the second pass re-reads the residual this same thread just stored.
#include <cuda_fp16.h>

template <int BLOCK>
__global__ void fused_add_rmsnorm_f16(__half* __restrict__ x, __half* __restrict__ residual,
                                      const __half* __restrict__ weight, float eps, int d) {
  constexpr int kWarps = BLOCK / 32;
  __shared__ float warp_sums[kWarps];
  __shared__ float s_rstd;
  __half* xr = x + static_cast<size_t>(blockIdx.x) * d;
  __half* rr = residual + static_cast<size_t>(blockIdx.x) * d;

  float ss = 0.0f;
  for (int c = threadIdx.x; c < d; c += BLOCK) {
    const __half z = __float2half(__half2float(xr[c]) + __half2float(rr[c]));
    rr[c] = z;
    const float zf = __half2float(z);
    ss += zf * zf;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, offset);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    ss = threadIdx.x < kWarps ? warp_sums[threadIdx.x] : 0.0f;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, offset);
    if (threadIdx.x == 0) s_rstd = rsqrtf(ss / d + eps);
  }
  __syncthreads();
  const float rstd = s_rstd;
  for (int c = threadIdx.x; c < d; c += BLOCK) {
    xr[c] = __float2half(__half2float(rr[c]) * rstd * __half2float(weight[c]));
  }
}
