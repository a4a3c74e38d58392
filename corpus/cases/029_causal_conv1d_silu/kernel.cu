// Causal depthwise conv1d with bias and SiLU, Mamba's short convolution (width 4):
// out[b, d, t] = silu(bias[d] + sum_j w[d, j] * x[b, d, t - (WIDTH - 1) + j]), x before t = 0 is 0.
// x is (batch, D, L). A block takes TILE time steps of one (b, d) row; the tile and its
// WIDTH - 1 steps of history are staged in shared memory, one load per element.
template <int TILE, int WIDTH>
__global__ void __launch_bounds__(TILE)
causal_conv1d_silu(const float* __restrict__ x, const float* __restrict__ w,
                   const float* __restrict__ bias, float* __restrict__ out, int D, int L) {
  __shared__ float xs[TILE + WIDTH - 1];
  const int row = blockIdx.y;  // b * D + d
  const int d = row % D;
  const int t0 = blockIdx.x * TILE, t = t0 + threadIdx.x;
  const float* __restrict__ xr = x + (size_t)row * L;

  xs[WIDTH - 1 + threadIdx.x] = t < L ? xr[t] : 0.0f;
  if (threadIdx.x < WIDTH - 1) {
    const int h = t0 - (WIDTH - 1) + threadIdx.x;  // history before the tile (h < t0 < L)
    xs[threadIdx.x] = h >= 0 ? xr[h] : 0.0f;
  }
  __syncthreads();
  if (t >= L) return;

  float acc = bias[d];
#pragma unroll
  for (int j = 0; j < WIDTH; ++j) acc += w[d * WIDTH + j] * xs[threadIdx.x + j];
  out[(size_t)row * L + t] = acc / (1.0f + expf(-acc));
}
