// Bitonic sort of each row (an argsort): one block per row sorts npad = 2 * blockDim.x keys in
// shared memory, padding past n with +inf. Each thread owns one compare-exchange pair per step,
// with a __syncthreads() after every step. Ties are broken by the original index, so the order
// is a stable ascending argsort. Shared memory (npad keys + npad indices) is dynamic.
#include <math_constants.h>

extern "C" __global__ void bitonic_sort_rows(const float* __restrict__ keys,
                                             float* __restrict__ sorted, int* __restrict__ order,
                                             int n) {
  extern __shared__ float smem[];
  const int npad = 2 * blockDim.x;
  float* sk = smem;
  int* sv = reinterpret_cast<int*>(smem + npad);
  const float* __restrict__ row = keys + (size_t)blockIdx.x * n;
  for (int i = threadIdx.x; i < npad; i += blockDim.x) {
    sk[i] = i < n ? row[i] : CUDART_INF_F;
    sv[i] = i;
  }
  __syncthreads();

  const int t = threadIdx.x;
  for (int k = 2; k <= npad; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      const int i = 2 * t - (t & (j - 1));  // the pair (i, i + j), i with bit j clear
      const int p = i + j;
      const bool ascending = (i & k) == 0;
      const float ki = sk[i], kp = sk[p];
      const int vi = sv[i], vp = sv[p];
      const bool greater = ki > kp || (ki == kp && vi > vp);
      if (greater == ascending) {
        sk[i] = kp, sk[p] = ki;
        sv[i] = vp, sv[p] = vi;
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    sorted[(size_t)blockIdx.x * n + i] = sk[i];
    order[(size_t)blockIdx.x * n + i] = sv[i];
  }
}
