// Cross-entropy backward through softmax, bf16 logits (mean reduction folded into grad_scale):
//   dlogits[r, j] = (softmax(logits[r])_j - [j == label[r]]) * grad_scale,  0 if label[r] < 0
// One block per row. Pass 1 keeps a running (max, sum of exp) per thread (online softmax) and
// merges the pairs with warp shuffles and shared memory; pass 2 writes the gradient.
#include <cuda_bf16.h>

struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};  // both empty
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
cross_entropy_backward(const __nv_bfloat16* __restrict__ logits, const int* __restrict__ labels,
                       __nv_bfloat16* __restrict__ dlogits, float grad_scale, int vocab) {
  constexpr int kWarps = BLOCK / 32;
  __shared__ MaxSum warp_ms[kWarps];
  const int row = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const __nv_bfloat16* __restrict__ xr = logits + (size_t)row * vocab;
  __nv_bfloat16* __restrict__ dr = dlogits + (size_t)row * vocab;
  const int label = labels[row];

  if (label < 0) {  // ignored position: zero gradient (the branch is uniform over the block)
    for (int i = threadIdx.x; i < vocab; i += BLOCK) dr[i] = __float2bfloat16(0.0f);
    return;
  }

  MaxSum ms = {-INFINITY, 0.0f};
  for (int i = threadIdx.x; i < vocab; i += BLOCK) {
    const float v = __bfloat162float(xr[i]);
    if (v > ms.m) {
      ms.s = ms.s * expf(ms.m - v) + 1.0f;
      ms.m = v;
    } else {
      ms.s += expf(v - ms.m);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    MaxSum other = {__shfl_xor_sync(0xffffffffu, ms.m, off),
                    __shfl_xor_sync(0xffffffffu, ms.s, off)};
    ms = merge(ms, other);
  }
  if (lane == 0) warp_ms[warp] = ms;
  __syncthreads();
  ms = warp_ms[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) ms = merge(ms, warp_ms[w]);
  const float lse = ms.m + logf(ms.s);

  for (int i = threadIdx.x; i < vocab; i += BLOCK) {
    const float p = expf(__bfloat162float(xr[i]) - lse);
    dr[i] = __float2bfloat16((p - (i == label ? 1.0f : 0.0f)) * grad_scale);
  }
}
