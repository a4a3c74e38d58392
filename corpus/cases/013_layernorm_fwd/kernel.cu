// LayerNorm forward over the last axis of x[rows, d], one block per row:
// y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps), with the biased variance
// computed in a second pass over (x - mean)^2 (stable for rows far from zero mean). mean and
// rstd are saved per row for the backward pass, as training frameworks do.
template <int BLOCK>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  constexpr int kWarps = BLOCK / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? scratch[lane] : 0.0f;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) scratch[kWarps] = v;  // broadcast slot
  }
  __syncthreads();
  v = scratch[kWarps];
  __syncthreads();  // scratch is reused by the next call
  return v;
}

template <int BLOCK>
__global__ void layernorm_fwd(const float* __restrict__ x, const float* __restrict__ gamma,
                              const float* __restrict__ beta, float* __restrict__ y,
                              float* __restrict__ mean_out, float* __restrict__ rstd_out, int d,
                              float eps) {
  __shared__ float scratch[BLOCK / 32 + 1];
  const size_t row = blockIdx.x;
  const float* src = x + row * d;
  float* dst = y + row * d;

  float s = 0.0f;
  for (int c = threadIdx.x; c < d; c += BLOCK) s += src[c];
  const float mean = block_sum<BLOCK>(s, scratch) / d;

  float ss = 0.0f;
  for (int c = threadIdx.x; c < d; c += BLOCK) {
    const float t = src[c] - mean;
    ss += t * t;
  }
  const float rstd = rsqrtf(block_sum<BLOCK>(ss, scratch) / d + eps);

  for (int c = threadIdx.x; c < d; c += BLOCK) dst[c] = (src[c] - mean) * rstd * gamma[c] + beta[c];
  if (threadIdx.x == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}
