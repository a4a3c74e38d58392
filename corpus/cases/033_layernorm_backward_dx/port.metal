// One threadgroup per row. The two row sums travel as one float2 through simd_sum and a single
// threadgroup slot per SIMD-group. Each thread owns N_READS consecutive elements per step.
constexpr int kSimds = BLOCK / 32;
threadgroup float2 simd_sums[kSimds];
const uint row = threadgroup_position_in_grid.x;
const int tid = int(thread_index_in_threadgroup);
const int len = n;
const device half* xr = x + size_t(row) * len;
const device half* dyr = dy + size_t(row) * len;
device half* dxr = dx + size_t(row) * len;
const float mu = mean[row], rs = rstd[row];

float2 sums = float2(0.0f);
for (int i = tid * N_READS; i < len; i += BLOCK * N_READS) {
  for (int k = 0; k < N_READS && i + k < len; ++k) {
    float g = float(dyr[i + k]) * gamma[i + k];
    float xhat = (float(xr[i + k]) - mu) * rs;
    sums += float2(g, g * xhat);
  }
}
sums = simd_sum(sums);
if (thread_index_in_simdgroup == 0) simd_sums[simdgroup_index_in_threadgroup] = sums;
threadgroup_barrier(mem_flags::mem_threadgroup);
sums = float2(0.0f);
for (int s = 0; s < kSimds; ++s) sums += simd_sums[s];
const float mean_g = sums.x / len, mean_gx = sums.y / len;

for (int i = tid * N_READS; i < len; i += BLOCK * N_READS) {
  for (int k = 0; k < N_READS && i + k < len; ++k) {
    float g = float(dyr[i + k]) * gamma[i + k];
    float xhat = (float(xr[i + k]) - mu) * rs;
    dxr[i + k] = half(rs * (g - mean_g - xhat * mean_gx));
  }
}
