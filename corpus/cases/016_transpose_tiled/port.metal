// Same tiling: a static TILE x (TILE + 1) threadgroup tile (4,224 bytes at TILE = 32, well
// under 32 KB), one barrier, bounds checks on both sides. The padding column stays: Apple's
// threadgroup banks are undocumented, but padded tiles are what MLX's own kernels use.
threadgroup float tile[TILE][TILE + 1];
const uint tx = thread_position_in_threadgroup.x;
const uint ty = thread_position_in_threadgroup.y;
const uint bx = threadgroup_position_in_grid.x;
const uint by = threadgroup_position_in_grid.y;
const uint nrows = uint(rows), ncols = uint(cols);

uint x_in = bx * TILE + tx;
uint y_in = by * TILE + ty;
for (uint j = 0; j < TILE; j += BLOCK_ROWS) {
  if (x_in < ncols && y_in + j < nrows) tile[ty + j][tx] = in[size_t(y_in + j) * ncols + x_in];
}
threadgroup_barrier(mem_flags::mem_threadgroup);
const uint x_out = by * TILE + tx;
const uint y_out = bx * TILE + ty;
for (uint j = 0; j < TILE; j += BLOCK_ROWS) {
  if (x_out < nrows && y_out + j < ncols) out[size_t(y_out + j) * nrows + x_out] = tile[tx][ty + j];
}
