// 4-bit block-quantized matmul Y = X W^T (Q4_0-like). Each row of W (N x K, K % 32 == 0) is
// stored as K/32 blocks of 32 weights: 16 bytes of nibbles qs (byte j holds weight j in its low
// nibble and weight j + 16 in its high nibble) and one half scale d; weight = d * (nibble - 8).
// One warp per output row n; a lane dequantizes a whole block per step (one 16-byte load) and
// dots it with each of the M activation rows (M <= 8).
#include <cuda_fp16.h>

constexpr int kMaxM = 8, kBlock = 32;

template <int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
q4_matmul(const float* __restrict__ X, const unsigned char* __restrict__ qs,
          const __half* __restrict__ d, float* __restrict__ Y, int M, int N, int K) {
  const int lane = threadIdx.x % 32;
  const int n = blockIdx.x * WARPS + threadIdx.x / 32;
  if (n >= N) return;
  const int nblocks = K / kBlock;
  const uint4* __restrict__ row_q = reinterpret_cast<const uint4*>(qs + (size_t)n * (K / 2));
  const __half* __restrict__ row_d = d + (size_t)n * nblocks;

  float acc[kMaxM];
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) acc[m] = 0.0f;
  for (int b = lane; b < nblocks; b += 32) {
    const uint4 raw = row_q[b];
    const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
    float w[kBlock];
    const float scale = __half2float(row_d[b]);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const unsigned byte = (words[j / 4] >> (8 * (j % 4))) & 0xFFu;
      w[j] = scale * (float)((int)(byte & 0xFu) - 8);
      w[j + 16] = scale * (float)((int)(byte >> 4) - 8);
    }
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) {
      if (m < M) {
        const float* __restrict__ x = X + (size_t)m * K + b * kBlock;
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < kBlock; ++j) s += x[j] * w[j];
        acc[m] += s;
      }
    }
  }
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) {
    float v = acc[m];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && m < M) Y[(size_t)m * N + n] = v;
  }
}
