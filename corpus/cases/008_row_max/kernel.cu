// Row-wise max of x[rows, n], one warp per row (blockDim = (32, WARPS)): lanes stride over the
// row, then an xor-shuffle butterfly leaves the max in every lane. No shared memory, no
// __syncthreads, so warps past the last row can simply return.
template <int WARPS>
__global__ void row_max_warp(const float* __restrict__ x, float* __restrict__ out, int rows,
                             int n) {
  const int row = blockIdx.x * WARPS + threadIdx.y;
  if (row >= rows) return;
  const float* src = x + static_cast<size_t>(row) * n;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < n; c += 32) m = fmaxf(m, src[c]);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (threadIdx.x == 0) out[row] = m;
}
