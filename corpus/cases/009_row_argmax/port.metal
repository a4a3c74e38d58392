// Metal has no pair shuffle-reduce, but an argmax is two SIMD collectives: simd_max of the
// values, then simd_min of the indices of the lanes that hold that max (lowest index wins).
// This replaces 5 steps x 2 shuffles; the same two collectives merge the SIMD groups.
constexpr uint kSimds = BLOCK / 32;
constexpr int kNone = metal::numeric_limits<int>::max();
threadgroup float simd_val[kSimds];
threadgroup int simd_idx[kSimds];
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const int cols = n;
const device float* src = x + size_t(threadgroup_position_in_grid.x) * uint(cols);

float v = -INFINITY;
int i = kNone;
for (int c = int(thread_position_in_threadgroup.x); c < cols; c += BLOCK) {
  const float xv = src[c];
  if (xv > v) {
    v = xv;
    i = c;
  }
}
float m = simd_max(v);
i = simd_min(v == m ? i : kNone);
if (lane == 0) {
  simd_val[sg] = m;
  simd_idx[sg] = i;
}
threadgroup_barrier(mem_flags::mem_threadgroup);
if (sg == 0) {
  v = lane < kSimds ? simd_val[lane] : -INFINITY;
  i = lane < kSimds ? simd_idx[lane] : kNone;
  m = simd_max(v);
  i = simd_min(v == m ? i : kNone);
  if (lane == 0) out[threadgroup_position_in_grid.x] = i;
}
