// 3x3 convolution, stride 1, zero padding 1, NCHW: out[n, co] = bias[co] + sum over ci of the
// 3x3 cross-correlation of x[n, ci] with w[co, ci]. A TILE x TILE block computes one output
// tile of one (n, co); per input channel it stages the (TILE + 2)^2 input patch (halo included,
// zeros outside the image) and the channel's 9 taps in shared memory.
template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
conv2d_3x3(const float* __restrict__ x, const float* __restrict__ w,
           const float* __restrict__ bias, float* __restrict__ out, int Cin, int Cout, int H,
           int W) {
  constexpr int P = TILE + 2;
  __shared__ float patch[P][P];
  __shared__ float taps[9];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TILE + tx;
  const int ox = blockIdx.x * TILE + tx, oy = blockIdx.y * TILE + ty;
  const int n = blockIdx.z / Cout, co = blockIdx.z % Cout;

  float acc = bias[co];
  for (int ci = 0; ci < Cin; ++ci) {
    const float* __restrict__ xc = x + ((size_t)n * Cin + ci) * H * W;
    for (int i = tid; i < P * P; i += TILE * TILE) {
      const int gy = blockIdx.y * TILE + i / P - 1, gx = blockIdx.x * TILE + i % P - 1;
      patch[i / P][i % P] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? xc[gy * W + gx] : 0.0f;
    }
    if (tid < 9) taps[tid] = w[((size_t)co * Cin + ci) * 9 + tid];
    __syncthreads();
#pragma unroll
    for (int ky = 0; ky < 3; ++ky)
#pragma unroll
      for (int kx = 0; kx < 3; ++kx) acc += taps[ky * 3 + kx] * patch[ty + ky][tx + kx];
    __syncthreads();
  }
  if (oy < H && ox < W) out[(((size_t)n * Cout + co) * H + oy) * W + ox] = acc;
}
