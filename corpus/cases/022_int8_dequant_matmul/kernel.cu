// W8A32 matmul Y = X (W * scale)^T for a few rows of activations: X is M x K float (M <= 8,
// e.g. decode tokens), W is N x K int8 with one float scale per output row n. One warp per n:
// lanes stride over k four weights at a time (one char4 load, K % 4 == 0) and keep one partial
// sum per activation row; the scale is applied once, after the warp reduction.
constexpr int kMaxM = 8;

template <int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
int8_matmul(const float* __restrict__ X, const signed char* __restrict__ W,
            const float* __restrict__ scale, float* __restrict__ Y, int M, int N, int K) {
  const int lane = threadIdx.x % 32;
  const int n = blockIdx.x * WARPS + threadIdx.x / 32;
  if (n >= N) return;  // whole warps only
  const signed char* __restrict__ w = W + (size_t)n * K;

  float acc[kMaxM];
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) acc[m] = 0.0f;
  if ((K & 3) == 0) {
    const char4* __restrict__ w4 = reinterpret_cast<const char4*>(w);
    for (int i = lane; i < K / 4; i += 32) {
      const char4 q = w4[i];
      const float4 wf = make_float4(q.x, q.y, q.z, q.w);
#pragma unroll
      for (int m = 0; m < kMaxM; ++m) {
        if (m < M) {
          const float4 xv = reinterpret_cast<const float4*>(X + (size_t)m * K)[i];
          acc[m] += xv.x * wf.x + xv.y * wf.y + xv.z * wf.z + xv.w * wf.w;
        }
      }
    }
  } else {
    for (int k = lane; k < K; k += 32) {
      const float wf = w[k];
#pragma unroll
      for (int m = 0; m < kMaxM; ++m)
        if (m < M) acc[m] += X[(size_t)m * K + k] * wf;
    }
  }
  const float s = scale[n];
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) {
    float v = acc[m];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && m < M) Y[(size_t)m * N + n] = v * s;
  }
}
