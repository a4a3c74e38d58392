// GELU (tanh form) on bfloat16 data: grid-stride loop over __nv_bfloat162 pairs, math in fp32,
// round-to-nearest-even back to bf16. An odd n leaves one last element for thread 0.
#include <cuda_bf16.h>

__device__ __forceinline__ float gelu_tanh(float x) {
  const float inner = 0.7978845608028654f * fmaf(0.044715f * x, x * x, x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

extern "C" __global__ void gelu_tanh_bf16(const __nv_bfloat16* __restrict__ x,
                                          __nv_bfloat16* __restrict__ y, int n) {
  const int pairs = n >> 1;
  const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(x);
  __nv_bfloat162* y2 = reinterpret_cast<__nv_bfloat162*>(y);
  const int stride = gridDim.x * blockDim.x;
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = tid; i < pairs; i += stride) {
    const float2 v = __bfloat1622float2(x2[i]);
    y2[i] = __floats2bfloat162_rn(gelu_tanh(v.x), gelu_tanh(v.y));
  }
  if ((n & 1) && tid == 0) y[n - 1] = __float2bfloat16(gelu_tanh(__bfloat162float(x[n - 1])));
}
