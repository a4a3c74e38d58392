// One threadgroup per row, one pass. Each thread keeps an online (max, sum) pair over its
// strided logits; a SIMD-group merges them with two reductions (simd_max of the maxima, then
// simd_sum of the sums rescaled to it) instead of a shuffle tree of pairwise merges, and
// SIMD-group 0 merges the per-SIMD-group pairs the same way after one barrier.
constexpr int kSimds = BLOCK / 32;
const float kNegInf = -numeric_limits<float>::infinity();
threadgroup float simd_m[kSimds], simd_s[kSimds];
const uint tid = thread_index_in_threadgroup, lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const uint row = threadgroup_position_in_grid.x;
const int vocab = V;
const device float* x = logits + size_t(row) * vocab;

float m = kNegInf, s = 0.0f;
for (int i = int(tid); i < vocab; i += BLOCK) {
  const float v = x[i];
  if (v > m) {
    s = s * exp(m - v) + 1.0f;  // exp(-inf) = 0 on the first element
    m = v;
  } else {
    s += exp(v - m);
  }
}
float gm = simd_max(m);
float gs = simd_sum(m == kNegInf ? 0.0f : s * exp(m - gm));
if (lane == 0) simd_m[sg] = gm, simd_s[sg] = gs;
threadgroup_barrier(mem_flags::mem_threadgroup);
if (sg == 0) {
  m = lane < uint(kSimds) ? simd_m[lane] : kNegInf;
  s = lane < uint(kSimds) ? simd_s[lane] : 0.0f;
  gm = simd_max(m);
  gs = simd_sum(m == kNegInf ? 0.0f : s * exp(m - gm));
  if (lane == 0) {
    const int t = targets[row];
    loss[row] = t < 0 ? 0.0f : (log(gs) + gm) - x[t];
  }
}
