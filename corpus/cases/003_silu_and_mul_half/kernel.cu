// SwiGLU gate as in LLM MLPs: out[t, i] = silu(x[t, i]) * x[t, d + i], x is [tokens, 2d] in
// fp16. One block per token; math in fp32, one rounding to half per output. When d is even,
// both halves of the row are 4-byte aligned and threads move __half2 pairs.
#include <cuda_fp16.h>

__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }

extern "C" __global__ void silu_and_mul_f16(__half* __restrict__ out,
                                            const __half* __restrict__ x, int d) {
  const int64_t token = blockIdx.x;
  const __half* gate = x + token * 2 * d;
  const __half* up = gate + d;
  __half* dst = out + token * d;
  if ((d & 1) == 0) {
    const __half2* gate2 = reinterpret_cast<const __half2*>(gate);
    const __half2* up2 = reinterpret_cast<const __half2*>(up);
    __half2* dst2 = reinterpret_cast<__half2*>(dst);
    for (int i = threadIdx.x; i < d / 2; i += blockDim.x) {
      const float2 g = __half22float2(gate2[i]);
      const float2 u = __half22float2(up2[i]);
      dst2[i] = __floats2half2_rn(silu(g.x) * u.x, silu(g.y) * u.y);
    }
  } else {
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      dst[i] = __float2half(silu(__half2float(gate[i])) * __half2float(up[i]));
    }
  }
}
