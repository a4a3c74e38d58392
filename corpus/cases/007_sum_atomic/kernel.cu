// Single-pass sum: each block reduces its grid-stride slice (shuffle-down per warp, warp sums
// through shared memory) and thread 0 adds the block's sum into *out with one atomicAdd.
// *out must be zero before the launch. The float result depends on block order.
__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;  // lane 0 holds the warp's sum
}

template <int BLOCK>
__global__ void sum_atomic(const float* __restrict__ x, float* __restrict__ out, int n) {
  constexpr int kWarps = BLOCK / 32;
  __shared__ float warp_sums[kWarps];
  float acc = 0.0f;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) acc += x[i];
  acc = warp_reduce_sum(acc);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < kWarps ? warp_sums[threadIdx.x] : 0.0f;
    acc = warp_reduce_sum(acc);
    if (threadIdx.x == 0) atomicAdd(out, acc);
  }
}
