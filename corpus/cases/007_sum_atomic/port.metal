// simd_sum per SIMD group, the per-group sums through threadgroup memory, then one relaxed
// atomic float add per threadgroup. `out` is an atomic output (atomic_outputs) zeroed by
// init_value = 0, which replaces the cudaMemset the CUDA launch needs.
constexpr uint kSimds = BLOCK / 32;
threadgroup float simd_sums[kSimds];
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const uint count = uint(n);

float acc = 0.0f;
for (uint i = thread_position_in_grid.x; i < count; i += threads_per_grid.x) acc += x[i];
acc = simd_sum(acc);
if (lane == 0) simd_sums[sg] = acc;
threadgroup_barrier(mem_flags::mem_threadgroup);
if (sg == 0) {
  acc = simd_sum(lane < kSimds ? simd_sums[lane] : 0.0f);
  if (lane == 0) atomic_fetch_add_explicit(&out[0], acc, memory_order_relaxed);
}
