// Scatter-add out[idx[i], :] += src[i, :] (e.g. an embedding backward). One thread per element
// of src; rows with the same target collide, so each add is an atomicAdd on global memory.
extern "C" __global__ void scatter_add_rows(const float* __restrict__ src,
                                            const int* __restrict__ idx, float* __restrict__ out,
                                            int n, int D) {
  const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= (size_t)n * D) return;
  const int i = (int)(e / D), c = (int)(e % D);
  atomicAdd(&out[(size_t)idx[i] * D + c], src[e]);
}
