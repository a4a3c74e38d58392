// GEMV y = A x for a row-major A (rows x n): one warp per row, WARPS rows per block.
// Lanes stride over the row (coalesced); when n % 4 == 0 every row starts 16-byte aligned and is
// read as float4. The warp's partial sums meet in a shuffle-down tree; lane 0 writes y[row].
template <int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
gemv_warp_per_row(const float* __restrict__ A, const float* __restrict__ x,
                  float* __restrict__ y, int rows, int n) {
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * WARPS + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together: no partial-warp shuffles
  const float* __restrict__ a = A + (size_t)row * n;

  float acc = 0.0f;
  if ((n & 3) == 0) {
    const float4* __restrict__ a4 = reinterpret_cast<const float4*>(a);
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    for (int i = lane; i < n / 4; i += 32) {
      const float4 av = __ldg(a4 + i), xv = __ldg(x4 + i);
      acc += av.x * xv.x + av.y * xv.y + av.z * xv.z + av.w * xv.w;
    }
  } else {
    for (int i = lane; i < n; i += 32) acc += __ldg(a + i) * __ldg(x + i);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) y[row] = acc;
}
