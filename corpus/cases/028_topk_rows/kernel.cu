// Top-k (k small) of each row, values descending, ties to the smaller index. One block per row:
// 1. every thread keeps a sorted top-K of its strided slice in registers (insertion, unrolled);
// 2. each warp merges its lanes' lists in K rounds of a warp argmax (xor-shuffle butterfly on
//    (value, index) pairs), the winning lane popping its head, into shared memory;
// 3. warp 0 takes the WARPS * K <= 32 candidates, one per lane, and runs K more rounds.
#include <math_constants.h>

template <int K, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
topk_rows(const float* __restrict__ x, float* __restrict__ values, int* __restrict__ indices,
          int n) {
  static_assert(WARPS * K <= 32, "the final merge holds one candidate per lane");
  constexpr int kNone = 0x7fffffff;
  __shared__ float cand_v[WARPS * K];
  __shared__ int cand_i[WARPS * K];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* __restrict__ row = x + (size_t)blockIdx.x * n;

  float v[K];
  int id[K];
#pragma unroll
  for (int r = 0; r < K; ++r) v[r] = -CUDART_INF_F, id[r] = kNone;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = row[i];
    if (e > v[K - 1]) {  // strict: an equal value seen later has the larger index
      v[K - 1] = e, id[K - 1] = i;
#pragma unroll
      for (int r = K - 1; r > 0; --r) {
        if (v[r] > v[r - 1]) {
          const float tv = v[r]; v[r] = v[r - 1]; v[r - 1] = tv;
          const int ti = id[r]; id[r] = id[r - 1]; id[r - 1] = ti;
        }
      }
    }
  }

  for (int r = 0; r < K; ++r) {
    float bv = v[0];
    int bi = id[0];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    if (id[0] == bi) {  // this lane supplied the winner: pop it
#pragma unroll
      for (int s = 0; s < K - 1; ++s) v[s] = v[s + 1], id[s] = id[s + 1];
      v[K - 1] = -CUDART_INF_F, id[K - 1] = kNone;
    }
    if (lane == 0) cand_v[warp * K + r] = bv, cand_i[warp * K + r] = bi;
  }
  __syncthreads();
  if (warp != 0) return;

  float cv = lane < WARPS * K ? cand_v[lane] : -CUDART_INF_F;
  int ci = lane < WARPS * K ? cand_i[lane] : kNone;
  for (int r = 0; r < K; ++r) {
    float bv = cv;
    int bi = ci;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    if (ci == bi) cv = -CUDART_INF_F, ci = kNone;
    if (lane == 0) {
      values[(size_t)blockIdx.x * K + r] = bv;
      indices[(size_t)blockIdx.x * K + r] = bi;
    }
  }
}
