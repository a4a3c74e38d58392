// Softmax backward over the last axis: dx = y * (dy - sum_j(y_j * dy_j)), one block per row.
// y is the forward output; the row dot product is a block reduction (warp shuffles, then one
// value per warp through shared memory).
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
softmax_backward(const float* __restrict__ y, const float* __restrict__ dy,
                 float* __restrict__ dx, int n) {
  constexpr int kWarps = BLOCK / 32;
  __shared__ float warp_dot[kWarps];
  const int row = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* __restrict__ yr = y + (size_t)row * n;
  const float* __restrict__ dyr = dy + (size_t)row * n;
  float* __restrict__ dxr = dx + (size_t)row * n;

  float dot = 0.0f;
  for (int i = threadIdx.x; i < n; i += BLOCK) dot += yr[i] * dyr[i];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
  if (lane == 0) warp_dot[warp] = dot;
  __syncthreads();
  dot = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) dot += warp_dot[w];

  for (int i = threadIdx.x; i < n; i += BLOCK) dxr[i] = yr[i] * (dyr[i] - dot);
}
