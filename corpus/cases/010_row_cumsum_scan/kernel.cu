// Block-wide inclusive prefix sum along each row of x[rows, n] (cumsum over the last axis),
// one block per row. The row is processed in BLOCK-wide chunks: a Hillis-Steele shuffle-up
// scan per warp, an exclusive offset per warp from a scan of the warp totals in shared
// memory, and a running carry from one chunk to the next.
template <int BLOCK>
__global__ void row_cumsum(const float* __restrict__ x, float* __restrict__ y, int n) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be whole warps");
  constexpr int kWarps = BLOCK / 32;
  __shared__ float warp_total[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* src = x + static_cast<size_t>(blockIdx.x) * n;
  float* dst = y + static_cast<size_t>(blockIdx.x) * n;

  float carry = 0.0f;
  for (int base = 0; base < n; base += BLOCK) {
    const int c = base + threadIdx.x;
    float v = c < n ? src[c] : 0.0f;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const float t = __shfl_up_sync(0xffffffffu, v, offset);
      if (lane >= offset) v += t;
    }
    if (lane == 31) warp_total[warp] = v;
    __syncthreads();
    if (warp == 0) {
      float t = lane < kWarps ? warp_total[lane] : 0.0f;
#pragma unroll
      for (int offset = 1; offset < kWarps; offset <<= 1) {
        const float u = __shfl_up_sync(0xffffffffu, t, offset);
        if (lane >= offset) t += u;
      }
      if (lane < kWarps) warp_total[lane] = t;  // now inclusive over warps
    }
    __syncthreads();
    const float offset = carry + (warp > 0 ? warp_total[warp - 1] : 0.0f);
    if (c < n) dst[c] = v + offset;
    carry += warp_total[kWarps - 1];
    __syncthreads();  // everyone has read warp_total before the next chunk rewrites it
  }
}
