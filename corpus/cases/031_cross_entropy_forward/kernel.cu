// Cross-entropy forward per row: loss = logsumexp(logits) - logits[target] (log-softmax + NLL),
// 0 for a negative (ignored) target. One block per row, one pass over the logits: each thread
// keeps an online (max, sum of exp(x - max)) pair, pairs merge across the warp with xor
// shuffles and across warps through shared memory.
#include <math_constants.h>

// Merge (m, s) with (om, os): both rescaled to the larger max; an empty side (-inf) adds 0.
__device__ __forceinline__ void lse_merge(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  if (nm == -CUDART_INF_F) return;
  s = (m == -CUDART_INF_F ? 0.0f : s * expf(m - nm)) +
      (om == -CUDART_INF_F ? 0.0f : os * expf(om - nm));
  m = nm;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
cross_entropy_forward(const float* __restrict__ logits, const int* __restrict__ targets,
                      float* __restrict__ loss, int V) {
  constexpr int kWarps = BLOCK / 32;
  __shared__ float warp_m[kWarps], warp_s[kWarps];
  const int row = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* __restrict__ x = logits + (size_t)row * V;

  float m = -CUDART_INF_F, s = 0.0f;
  for (int i = threadIdx.x; i < V; i += BLOCK) lse_merge(m, s, x[i], 1.0f);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, off);
    const float os = __shfl_xor_sync(0xffffffffu, s, off);
    lse_merge(m, s, om, os);
  }
  if (lane == 0) warp_m[warp] = m, warp_s[warp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) lse_merge(m, s, warp_m[w], warp_s[w]);
    const int t = targets[row];
    loss[row] = t < 0 ? 0.0f : (logf(s) + m) - x[t];
  }
}
