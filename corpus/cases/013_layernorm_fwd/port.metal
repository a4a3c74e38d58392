// Same two statistics passes and the output pass. A block sum is simd_sum, one slot per SIMD
// group, a barrier, and every SIMD group summing the slots itself: no broadcast slot and one
// barrier fewer than the CUDA helper. Two scratch arrays (one per statistic) remove the
// barrier that guarded reuse. BLOCK is a template argument: the arrays have static sizes.
constexpr uint kSimds = BLOCK / 32;
threadgroup float sum_scratch[kSimds];
threadgroup float sq_scratch[kSimds];
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const uint tid = thread_position_in_threadgroup.x;
const uint row = threadgroup_position_in_grid.x;
const uint cols = uint(d);
const device float* src = x + size_t(row) * cols;
device float* dst = y + size_t(row) * cols;

float s = 0.0f;
for (uint c = tid; c < cols; c += BLOCK) s += src[c];
s = simd_sum(s);
if (lane == 0) sum_scratch[sg] = s;
threadgroup_barrier(mem_flags::mem_threadgroup);
const float mean = simd_sum(lane < kSimds ? sum_scratch[lane] : 0.0f) / float(cols);

float ss = 0.0f;
for (uint c = tid; c < cols; c += BLOCK) {
  const float t = src[c] - mean;
  ss += t * t;
}
ss = simd_sum(ss);
if (lane == 0) sq_scratch[sg] = ss;
threadgroup_barrier(mem_flags::mem_threadgroup);
const float var = simd_sum(lane < kSimds ? sq_scratch[lane] : 0.0f) / float(cols);
const float rstd = rsqrt(var + eps);

for (uint c = tid; c < cols; c += BLOCK) dst[c] = (src[c] - mean) * rstd * gamma[c] + beta[c];
if (tid == 0) {
  mean_out[row] = mean;
  rstd_out[row] = rstd;
}
