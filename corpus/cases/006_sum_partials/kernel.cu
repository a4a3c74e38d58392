// Two-pass sum, pass kernel: each block sums a grid-stride slice of x and writes one partial.
// Run once with G blocks over x (G partials), then once with 1 block over the G partials.
// Reduction: per-thread serial sum, xor-shuffle butterfly per warp, warp sums through shared
// memory, the first warp reduces those.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    block_sum_partials(const float* __restrict__ x, float* __restrict__ partials, int n) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be whole warps");
  constexpr int kWarps = BLOCK / 32;
  __shared__ float warp_sums[kWarps];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;

  float acc = 0.0f;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) acc += x[i];
  acc = warp_sum(acc);
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < kWarps ? warp_sums[lane] : 0.0f;
    acc = warp_sum(acc);
    if (lane == 0) partials[blockIdx.x] = acc;
  }
}
