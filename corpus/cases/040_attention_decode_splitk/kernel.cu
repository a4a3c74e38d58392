// Decode attention (one query token) over a KV cache with grouped-query heads, split-K inside one
// block: o[b, h] = softmax(scale * q[b, h] . k[b, h / gqa, :]^T) v[b, h / gqa, :].
// One block per (query head, batch). Warp w takes a contiguous chunk of the keys; lane i holds
// D/32 consecutive elements of q, k, v and the output, so a score is a warp all-reduce. Each
// warp runs its own online softmax (exp2 domain); the partial (max, sum, output) triples are
// merged with a log-sum-exp rescale through shared memory.
#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }

template <typename T, int D, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
attn_decode_splitk(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                   T* __restrict__ o, int L, int gqa, float scale) {
  constexpr int kPer = D / 32;
  __shared__ float s_max[WARPS];
  __shared__ float s_sum[WARPS];
  __shared__ float s_out[WARPS][D];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int head = blockIdx.x, batch = blockIdx.y, q_heads = gridDim.x;
  const size_t kv_head = (size_t)batch * (q_heads / gqa) + head / gqa;
  q += ((size_t)batch * q_heads + head) * D + lane * kPer;
  o += ((size_t)batch * q_heads + head) * D;
  k += kv_head * L * D + lane * kPer;
  v += kv_head * L * D + lane * kPer;

  float qr[kPer], acc[kPer];
  const float qscale = scale * 1.4426950408889634f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    qr[i] = to_float(q[i]) * qscale;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;

  const int chunk = (L + WARPS - 1) / WARPS;
  const int begin = warp * chunk, end = min(L, begin + chunk);
  for (int t = begin; t < end; ++t) {
    const T* kt = k + (size_t)t * D;
    const T* vt = v + (size_t)t * D;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) s += qr[i] * to_float(kt[i]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    const float m_new = fmaxf(m, s);
    const float alpha = exp2f(m - m_new), p = exp2f(s - m_new);
    l = l * alpha + p;
    m = m_new;
#pragma unroll
    for (int i = 0; i < kPer; ++i) acc[i] = acc[i] * alpha + p * to_float(vt[i]);
  }

  // Merge the warps' partial softmaxes (a warp with no keys has m = -inf, l = 0, acc = 0).
  if (lane == 0) {
    s_max[warp] = m;
    s_sum[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) s_out[warp][lane * kPer + i] = acc[i];
  __syncthreads();
  float m_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < WARPS; ++w) m_all = fmaxf(m_all, s_max[w]);
  for (int d = threadIdx.x; d < D; d += WARPS * 32) {
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const float f = exp2f(s_max[w] - m_all);  // 0 for an empty warp
      num += s_out[w][d] * f;
      den += s_sum[w] * f;
    }
    o[d] = from_float<T>(num / den);
  }
}
