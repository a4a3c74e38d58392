// 256-bin histogram of bytes. Each block counts its grid-stride share into a shared-memory
// histogram with shared atomics (cheap, block-local contention), then adds its non-zero bins
// to the global histogram with one global atomicAdd each. Bytes are read four at a time.
constexpr int kBins = 256;

extern "C" __global__ void __launch_bounds__(256)
histogram256(const unsigned char* __restrict__ data, unsigned int* __restrict__ hist, int n) {
  __shared__ unsigned int local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0u;
  __syncthreads();

  const int stride = gridDim.x * blockDim.x;
  const int first = blockIdx.x * blockDim.x + threadIdx.x;
  const uchar4* __restrict__ data4 = reinterpret_cast<const uchar4*>(data);
  for (int i = first; i < n / 4; i += stride) {
    const uchar4 v = data4[i];
    atomicAdd(&local[v.x], 1u);
    atomicAdd(&local[v.y], 1u);
    atomicAdd(&local[v.z], 1u);
    atomicAdd(&local[v.w], 1u);
  }
  for (int i = (n & ~3) + first; i < n; i += stride) atomicAdd(&local[data[i]], 1u);
  __syncthreads();

  for (int b = threadIdx.x; b < kBins; b += blockDim.x)
    if (local[b] != 0u) atomicAdd(&hist[b], local[b]);
}
