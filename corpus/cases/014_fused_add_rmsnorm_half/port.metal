// Both CUDA in-place buffers come in as inputs (x, residual) and leave as fresh outputs
// (x_out, residual_out). The second pass re-reads residual_out, which only this thread wrote,
// so no device barrier is needed. simd_sum replaces the butterflies; every SIMD group sums the
// per-group slots itself, so the rstd broadcast slot and its second barrier disappear.
constexpr uint kSimds = BLOCK / 32;
threadgroup float simd_sums[kSimds];
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const uint tid = thread_position_in_threadgroup.x;
const uint cols = uint(d);
const size_t off = size_t(threadgroup_position_in_grid.x) * cols;

float ss = 0.0f;
for (uint c = tid; c < cols; c += BLOCK) {
  const half z = half(float(x[off + c]) + float(residual[off + c]));
  residual_out[off + c] = z;
  ss += float(z) * float(z);
}
ss = simd_sum(ss);
if (lane == 0) simd_sums[sg] = ss;
threadgroup_barrier(mem_flags::mem_threadgroup);
ss = simd_sum(lane < kSimds ? simd_sums[lane] : 0.0f);
const float rstd = rsqrt(ss / float(cols) + eps);
for (uint c = tid; c < cols; c += BLOCK) {
  x_out[off + c] = half(float(residual_out[off + c]) * rstd * float(weight[c]));
}
