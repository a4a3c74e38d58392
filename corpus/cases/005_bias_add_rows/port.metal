// Same 2-D shape: x over columns, y over rows with a grid-stride loop (threads_per_grid.y),
// bias held in a register. __ldg has no Metal counterpart; inputs are read-only already.
const uint c = thread_position_in_grid.x;
const uint ncols = uint(cols);
if (c < ncols) {
  const float b = bias[c];
  for (uint r = thread_position_in_grid.y; r < uint(rows); r += threads_per_grid.y) {
    const size_t idx = size_t(r) * ncols + c;
    y[idx] = x[idx] + b;
  }
}
