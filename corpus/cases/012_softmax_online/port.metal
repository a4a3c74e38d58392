// The per-thread online update is unchanged. The pairwise (m, d) merge over 5 shuffle rounds
// (10 shuffles, 5 rescalings) becomes two collectives: M = simd_max(m), then
// simd_sum(d * exp(m - M)), with lanes that saw nothing (m = -inf) contributing 0 so an empty
// SIMD group yields (-inf, 0) instead of NaN. The same two collectives merge the SIMD groups.
constexpr uint kSimds = BLOCK / 32;
threadgroup float part_m[kSimds];
threadgroup float part_d[kSimds];
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const uint tid = thread_position_in_threadgroup.x;
const uint cols = uint(n);
const device float* src = x + size_t(threadgroup_position_in_grid.x) * cols;
device float* dst = y + size_t(threadgroup_position_in_grid.x) * cols;

float m = -INFINITY;
float d = 0.0f;
for (uint c = tid; c < cols; c += BLOCK) {
  const float v = src[c];
  if (v > m) {
    d = d * exp(m - v) + 1.0f;
    m = v;
  } else {
    d += exp(v - m);
  }
}
float row_m = simd_max(m);
float row_d = simd_sum(m == -INFINITY ? 0.0f : d * exp(m - row_m));
if (lane == 0) {
  part_m[sg] = row_m;
  part_d[sg] = row_d;
}
threadgroup_barrier(mem_flags::mem_threadgroup);
m = lane < kSimds ? part_m[lane] : -INFINITY;
d = lane < kSimds ? part_d[lane] : 0.0f;
row_m = simd_max(m);
row_d = simd_sum(m == -INFINITY ? 0.0f : d * exp(m - row_m));

const float inv = 1.0f / row_d;
for (uint c = tid; c < cols; c += BLOCK) dst[c] = exp(src[c] - row_m) * inv;
