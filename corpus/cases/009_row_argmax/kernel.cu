// Row-wise argmax of x[rows, n], one block per row; ties go to the lowest index (as
// numpy/torch argmax). Each thread scans its strided columns with a strict '>', so it keeps
// its first maximum; (value, index) pairs are then merged by a xor-shuffle butterfly per warp
// and once more across warps through shared memory.
#include <climits>

__device__ __forceinline__ void keep_better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__device__ __forceinline__ void warp_argmax(float& v, int& i) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int oi = __shfl_xor_sync(0xffffffffu, i, offset);
    keep_better(v, i, ov, oi);
  }
}

template <int BLOCK>
__global__ void row_argmax(const float* __restrict__ x, int* __restrict__ out, int n) {
  constexpr int kWarps = BLOCK / 32;
  __shared__ float warp_val[kWarps];
  __shared__ int warp_idx[kWarps];
  const float* src = x + static_cast<size_t>(blockIdx.x) * n;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  float v = -INFINITY;
  int i = INT_MAX;  // an empty thread loses every tie
  for (int c = threadIdx.x; c < n; c += BLOCK) {
    const float xv = src[c];
    if (xv > v) {
      v = xv;
      i = c;
    }
  }
  warp_argmax(v, i);
  if (lane == 0) {
    warp_val[warp] = v;
    warp_idx[warp] = i;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? warp_val[lane] : -INFINITY;
    i = lane < kWarps ? warp_idx[lane] : INT_MAX;
    warp_argmax(v, i);
    if (lane == 0) out[blockIdx.x] = i;
  }
}
