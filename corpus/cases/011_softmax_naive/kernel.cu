// Row softmax, the plain three-pass form: one block per row; pass 1 the row max, pass 2 the
// sum of exp(x - max), pass 3 writes exp(x - max) / sum. Block reductions: xor-shuffle
// butterfly per warp, warp results through shared memory, every warp then reduces those so
// the result reaches all threads without a broadcast store.
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <int BLOCK, typename Op>
__device__ __forceinline__ float block_allreduce(float v, float* scratch, Op op, float identity) {
  constexpr int kWarps = BLOCK / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < kWarps ? scratch[threadIdx.x & 31] : identity;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // scratch may be reused by the next reduction
  return v;
}

template <int BLOCK>
__global__ void softmax_naive(const float* __restrict__ x, float* __restrict__ y, int n) {
  __shared__ float scratch[BLOCK / 32];
  const float* src = x + static_cast<size_t>(blockIdx.x) * n;
  float* dst = y + static_cast<size_t>(blockIdx.x) * n;

  float m = -INFINITY;
  for (int c = threadIdx.x; c < n; c += BLOCK) m = fmaxf(m, src[c]);
  m = block_allreduce<BLOCK>(m, scratch, MaxOp{}, -INFINITY);

  float s = 0.0f;
  for (int c = threadIdx.x; c < n; c += BLOCK) s += expf(src[c] - m);
  s = block_allreduce<BLOCK>(s, scratch, SumOp{}, 0.0f);

  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < n; c += BLOCK) dst[c] = expf(src[c] - m) * inv;
}
