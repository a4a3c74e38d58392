// simd_prefix_inclusive_sum replaces both shuffle-up ladders (the chunk's and the one over
// SIMD-group totals). Chunk structure, carry and the three barriers stay as in CUDA; BLOCK is
// a template argument so the scratch array has a static size.
constexpr uint kSimds = BLOCK / 32;
threadgroup float simd_total[kSimds];
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const uint cols = uint(n);
const device float* src = x + size_t(threadgroup_position_in_grid.x) * cols;
device float* dst = y + size_t(threadgroup_position_in_grid.x) * cols;

float carry = 0.0f;
for (uint base = 0; base < cols; base += BLOCK) {
  const uint c = base + thread_position_in_threadgroup.x;
  float v = simd_prefix_inclusive_sum(c < cols ? src[c] : 0.0f);
  if (lane == 31) simd_total[sg] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    float t = simd_prefix_inclusive_sum(lane < kSimds ? simd_total[lane] : 0.0f);
    if (lane < kSimds) simd_total[lane] = t;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const float offset = carry + (sg > 0 ? simd_total[sg - 1] : 0.0f);
  if (c < cols) dst[c] = v + offset;
  carry += simd_total[kSimds - 1];
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
