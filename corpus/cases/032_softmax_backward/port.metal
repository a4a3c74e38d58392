// One threadgroup per row. Each thread owns N_READS consecutive elements per step (fewer loop
// trips than CUDA's block-strided single elements); the dot product is a simd_sum per
// SIMD-group, then one value per SIMD-group through threadgroup memory.
constexpr int kSimds = BLOCK / 32;
threadgroup float simd_dot[kSimds];
const uint row = threadgroup_position_in_grid.x;
const int tid = int(thread_index_in_threadgroup);
const int len = n;
const device float* yr = y + size_t(row) * len;
const device float* dyr = dy + size_t(row) * len;
device float* dxr = dx + size_t(row) * len;

float dot = 0.0f;
for (int i = tid * N_READS; i < len; i += BLOCK * N_READS) {
  for (int k = 0; k < N_READS && i + k < len; ++k) dot = fma(yr[i + k], dyr[i + k], dot);
}
dot = simd_sum(dot);
if (thread_index_in_simdgroup == 0) simd_dot[simdgroup_index_in_threadgroup] = dot;
threadgroup_barrier(mem_flags::mem_threadgroup);
dot = 0.0f;
for (int s = 0; s < kSimds; ++s) dot += simd_dot[s];

for (int i = tid * N_READS; i < len; i += BLOCK * N_READS) {
  for (int k = 0; k < N_READS && i + k < len; ++k) dxr[i + k] = yr[i + k] * (dyr[i + k] - dot);
}
