// Row softmax with the online normaliser (Milakov & Gimelshein): one read of the row keeps a
// running (max m, sum d of exp(x - m)) per thread, rescaling d whenever m grows; the pairs are
// merged across the warp with shuffles and across warps through shared memory; a second read
// writes exp(x - m) / d. Two passes over memory instead of three.
struct MaxSum {
  float m;
  float d;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};  // both empty: avoid exp(-inf - -inf) = NaN
  return {m, a.d * expf(a.m - m) + b.d * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum o;
    o.m = __shfl_xor_sync(0xffffffffu, v.m, offset);
    o.d = __shfl_xor_sync(0xffffffffu, v.d, offset);
    v = merge(v, o);
  }
  return v;
}

template <int BLOCK>
__global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, int n) {
  constexpr int kWarps = BLOCK / 32;
  __shared__ MaxSum partial[kWarps];
  const float* src = x + static_cast<size_t>(blockIdx.x) * n;
  float* dst = y + static_cast<size_t>(blockIdx.x) * n;
  const int lane = threadIdx.x & 31;

  MaxSum acc{-INFINITY, 0.0f};
  for (int c = threadIdx.x; c < n; c += BLOCK) {
    const float v = src[c];
    if (v > acc.m) {
      acc.d = acc.d * expf(acc.m - v) + 1.0f;
      acc.m = v;
    } else {
      acc.d += expf(v - acc.m);
    }
  }
  acc = warp_merge(acc);
  if (lane == 0) partial[threadIdx.x >> 5] = acc;
  __syncthreads();
  acc = lane < kWarps ? partial[lane] : MaxSum{-INFINITY, 0.0f};
  acc = warp_merge(acc);  // every warp ends with the row's (m, d)

  const float inv = 1.0f / acc.d;
  for (int c = threadIdx.x; c < n; c += BLOCK) dst[c] = expf(src[c] - acc.m) * inv;
}
