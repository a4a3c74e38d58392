// A threadgroup owns 32 columns: the lane is the column (coalesced reads), each of the SIMDS
// SIMD-groups strides over the rows. The per-SIMD-group partials meet in threadgroup memory
// once, and SIMD-group 0 adds them up: one barrier instead of a shared-memory tree.
threadgroup float2 partial[SIMDS][32];
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const int col = int(threadgroup_position_in_grid.x * 32 + lane);
const int nrows = rows, ncols = n;

float2 acc = float2(0.0f);  // (dgamma, dbeta)
if (col < ncols) {
  for (int r = int(sg); r < nrows; r += SIMDS) {
    const size_t i = size_t(r) * ncols + col;
    const float g = float(dy[i]);
    acc += float2(g * (float(x[i]) - mean[r]) * rstd[r], g);
  }
}
partial[sg][lane] = acc;
threadgroup_barrier(mem_flags::mem_threadgroup);
if (sg == 0 && col < ncols) {
  for (int s = 1; s < SIMDS; ++s) acc += partial[s][lane];
  dgamma[col] = acc.x;
  dbeta[col] = acc.y;
}
