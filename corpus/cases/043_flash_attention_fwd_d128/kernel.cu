// FlashAttention-2-style forward, FP32 accumulation on CUDA cores (no tensor cores):
//   o = softmax(scale * q k^T [+ causal mask]) v,   lse = logsumexp of the scaled scores (natural log)
// q, o: [B, H, Lq, D]; k, v: [B, H, Lk, D]; lse: [B, H, Lq]. One block per (query tile, head,
// batch). The query tile is staged once in shared memory, pre-scaled by scale*log2(e) so the
// online softmax runs in the exp2 domain; K/V tiles of BK=32 keys stream through shared memory.
// Each of the 4 warps owns BQ/4 query rows: lane j scores key j of the tile, the row max is a
// warp shuffle reduction, the row sum stays per lane until the end, and P goes through a per-warp
// slice of shared memory to the P.V product, where lane c accumulates output columns c, c+32, ...
#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }

template <typename T, int D, int BQ, bool CAUSAL>
__global__ void __launch_bounds__(128)
flash_attn_fwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
               T* __restrict__ o, float* __restrict__ lse, int Lq, int Lk, float scale) {
  constexpr int kThreads = 128, kWarps = 4, BK = 32;
  constexpr int kRows = BQ / kWarps;  // query rows per warp
  constexpr int kCols = D / 32;       // output columns per lane
  static_assert(BQ % kWarps == 0 && D % 32 == 0, "tile shape");
  __shared__ float Qs[BQ][D];
  __shared__ float Ks[BK][D + 1];  // +1: lanes read different rows of the same column
  __shared__ float Vs[BK][D];
  __shared__ float Ps[BQ][BK];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int q0 = blockIdx.x * BQ;
  const size_t bh = (size_t)blockIdx.z * gridDim.y + blockIdx.y;
  q += bh * Lq * D;
  o += bh * Lq * D;
  lse += bh * Lq;
  k += bh * Lk * D;
  v += bh * Lk * D;

  const float qscale = scale * 1.4426950408889634f;
  for (int i = threadIdx.x; i < BQ * D; i += kThreads) {
    const int r = i / D, c = i % D;
    Qs[r][c] = q0 + r < Lq ? to_float(q[(size_t)(q0 + r) * D + c]) * qscale : 0.0f;
  }

  float m[kRows], l[kRows], acc[kRows][kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[r][c] = 0.0f;
  }

  // Causal (queries and keys aligned at 0): no key after the tile's last query is needed.
  const int kv_end = CAUSAL ? min(Lk, q0 + BQ) : Lk;
  for (int kv0 = 0; kv0 < kv_end; kv0 += BK) {
    __syncthreads();  // everyone is done with the previous K/V tile
    for (int i = threadIdx.x; i < BK * D; i += kThreads) {
      const int r = i / D, c = i % D;
      const bool in = kv0 + r < Lk;
      Ks[r][c] = in ? to_float(k[(size_t)(kv0 + r) * D + c]) : 0.0f;
      Vs[r][c] = in ? to_float(v[(size_t)(kv0 + r) * D + c]) : 0.0f;
    }
    __syncthreads();

    const int key = kv0 + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = warp * kRows + r;
      float s = 0.0f;
#pragma unroll 16
      for (int d = 0; d < D; ++d) s += Qs[row][d] * Ks[lane][d];
      if (key >= Lk || (CAUSAL && key > q0 + row)) s = -INFINITY;
      float tile_max = s;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
      const float m_new = fmaxf(m[r], tile_max);  // finite: key 0 is in the first tile
      const float alpha = exp2f(m[r] - m_new);
      const float p = exp2f(s - m_new);
      l[r] = l[r] * alpha + p;  // this lane's share of the row sum
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[r][c] *= alpha;
      Ps[row][lane] = p;
    }
    __syncwarp();  // P rows are private to the warp

#pragma unroll 4
    for (int j = 0; j < BK; ++j) {
      float vj[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) vj[c] = Vs[j][lane + 32 * c];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float p = Ps[warp * kRows + r][j];
#pragma unroll
        for (int c = 0; c < kCols; ++c) acc[r][c] += p * vj[c];
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float sum = l[r];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const int row = q0 + warp * kRows + r;
    if (row < Lq) {
      const float inv = 1.0f / sum;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        o[(size_t)row * D + lane + 32 * c] = from_float<T>(acc[r][c] * inv);
      if (lane == 0) lse[row] = (m[r] + log2f(sum)) * 0.6931471805599453f;
    }
  }
}
