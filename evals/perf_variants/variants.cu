// Deliberate variants for validating the cost model (docs/perf-model.md): each family does one
// job several ways. Every kernel is grid-uniform (each block does the same work), so cuda_sim
// may count a prefix of the grid and scale (evals/perf_validate.py).

// ---- copy: coalesced, strided, vector and misaligned reads of n floats -------------------------
extern "C" __global__ void copy_coalesced(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

// Reads element (i % (n/S)) * S + i / (n/S): a permutation, S floats apart within a warp.
template <int S>
__global__ void copy_strided(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int rows = n / S;
  if (i < n) out[i] = in[(i % rows) * S + i / rows];
}

extern "C" __global__ void copy_float2(const float2* in, float2* out, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) out[i] = in[i];
}

extern "C" __global__ void copy_float4(const float4* in, float4* out, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) out[i] = in[i];
}

extern "C" __global__ void copy_offset1(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i + 1 < n) out[i] = in[i + 1];
}

// ---- reduce: one partial sum per block of B threads, each thread adds 4 elements --------------
template <int B>
__global__ void reduce_smem_interleaved(const float* in, float* out) {
  __shared__ float s[B];
  int t = threadIdx.x;
  const float* p = in + (size_t)blockIdx.x * B * 4;
  s[t] = p[t] + p[t + B] + p[t + 2 * B] + p[t + 3 * B];
  __syncthreads();
  for (int k = 1; k < B; k *= 2) {
    if (t % (2 * k) == 0) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

template <int B>
__global__ void reduce_smem_sequential(const float* in, float* out) {
  __shared__ float s[B];
  int t = threadIdx.x;
  const float* p = in + (size_t)blockIdx.x * B * 4;
  s[t] = p[t] + p[t + B] + p[t + 2 * B] + p[t + 3 * B];
  __syncthreads();
  for (int k = B / 2; k > 0; k /= 2) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

template <int B>
__global__ void reduce_shuffle(const float* in, float* out) {
  __shared__ float warp_sums[B / 32];
  int t = threadIdx.x;
  const float* p = in + (size_t)blockIdx.x * B * 4;
  float v = p[t] + p[t + B] + p[t + 2 * B] + p[t + 3 * B];
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (t % 32 == 0) warp_sums[t / 32] = v;
  __syncthreads();
  if (t < 32) {
    v = t < B / 32 ? warp_sums[t] : 0.0f;
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    if (t == 0) out[blockIdx.x] = v;
  }
}

// Every warp adds its sum to one of 8 addresses with an atomic.
template <int B>
__global__ void reduce_atomic_warp(const float* in, float* out) {
  int t = threadIdx.x;
  const float* p = in + (size_t)blockIdx.x * B * 4;
  float v = p[t] + p[t + B] + p[t + 2 * B] + p[t + 3 * B];
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (t % 32 == 0) atomicAdd(&out[blockIdx.x % 8], v);
}

// ---- transpose of a rows x cols float matrix ----------------------------------------------------
extern "C" __global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8) out[(size_t)x * rows + y + j] = in[(size_t)(y + j) * cols + x];
}

extern "C" __global__ void transpose_naive_rowwrite(const float* in, float* out, int rows,
                                                    int cols) {
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8) out[(size_t)(y + j) * rows + x] = in[(size_t)x * cols + y + j];
}

template <int PAD>
__global__ void transpose_smem(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[32][32 + PAD];
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8) out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// 16x16 tiles, 16x16 threads: half-warp rows.
template <int PAD>
__global__ void transpose_smem16(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[16][16 + PAD];
  int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
  tile[threadIdx.y][threadIdx.x] = in[(size_t)y * cols + x];
  __syncthreads();
  x = blockIdx.y * 16 + threadIdx.x;
  y = blockIdx.x * 16 + threadIdx.y;
  out[(size_t)y * rows + x] = tile[threadIdx.x][threadIdx.y];
}

// ---- gemm C = A B, n x n floats ---------------------------------------------------------------
template <int T>
__global__ void gemm_tiled(const float* A, const float* B, float* C, int n) {
  __shared__ float As[T][T], Bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += T) {
    As[ty][tx] = A[(size_t)row * n + k0 + tx];
    Bs[ty][tx] = B[(size_t)(k0 + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < T; k++) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[(size_t)row * n + col] = acc;
}

// Thread x walks rows: A reads coalesced across the warp, B reads broadcast, C writes strided.
extern "C" __global__ void gemm_naive_swapped(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x, col = blockIdx.y * blockDim.y + threadIdx.y;
  float acc = 0.0f;
  for (int k = 0; k < n; k++) acc += A[(size_t)row * n + k] * B[(size_t)k * n + col];
  C[(size_t)row * n + col] = acc;
}

// ---- shared-memory bank conflicts: 32 rounds of reads s[(t * S) % 1024] -------------------------
template <int S>
__global__ void smem_stride(const float* in, float* out) {
  __shared__ float s[1024 + 32];
  int t = threadIdx.x;
  for (int i = t; i < 1024 + 32; i += blockDim.x) s[i] = in[(size_t)blockIdx.x * 1056 + i];
  __syncthreads();
  float acc = 0.0f;
  for (int r = 0; r < 64; r++) acc += s[(t * S + r) % 1024 + (S == 33 ? t / 32 : 0)];
  out[(size_t)blockIdx.x * blockDim.x + t] = acc;
}
