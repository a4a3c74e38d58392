// simd_sum replaces each 5-step shuffle butterfly. BLOCK is a template argument so the
// per-SIMD-group scratch has a static size (metal_kernel has no dynamic threadgroup memory).
constexpr uint kSimds = BLOCK / 32;
threadgroup float simd_sums[kSimds];
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const uint count = uint(n);

float acc = 0.0f;
for (uint i = threadgroup_position_in_grid.x * BLOCK + thread_position_in_threadgroup.x;
     i < count; i += threadgroups_per_grid.x * BLOCK) {
  acc += x[i];
}
acc = simd_sum(acc);
if (lane == 0) simd_sums[sg] = acc;
threadgroup_barrier(mem_flags::mem_threadgroup);
if (sg == 0) {
  acc = simd_sum(lane < kSimds ? simd_sums[lane] : 0.0f);
  if (lane == 0) partials[threadgroup_position_in_grid.x] = acc;
}
