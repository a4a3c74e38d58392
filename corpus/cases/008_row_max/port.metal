// One SIMD group per row: the grid is 32 threads wide and one row of threads per matrix row;
// threadgroup (32, WARPS) cuts SIMD groups along y, so each grid row is one SIMD group.
// simd_max replaces the butterfly; the row guard is uniform per SIMD group.
const uint row = thread_position_in_grid.y;
if (row < uint(rows)) {
  const uint cols = uint(n);
  const device float* src = x + size_t(row) * cols;
  float m = -INFINITY;
  for (uint c = thread_position_in_threadgroup.x; c < cols; c += 32) m = fmax(m, src[c]);
  m = simd_max(m);
  if (thread_position_in_threadgroup.x == 0) out[row] = m;
}
