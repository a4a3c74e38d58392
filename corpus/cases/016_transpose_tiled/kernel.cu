// Matrix transpose out[cols, rows] = in[rows, cols]^T through a shared TILE x (TILE + 1) tile:
// coalesced reads of input rows, coalesced writes of output rows, and the +1 column of padding
// so the column-wise tile reads hit distinct banks. Blocks are TILE x BLOCK_ROWS threads;
// each thread moves TILE / BLOCK_ROWS elements. Edge tiles are bounds-checked both ways.
template <int TILE, int BLOCK_ROWS>
__global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out, int rows,
                                int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x;  // input column
  int y = blockIdx.y * TILE + threadIdx.y;  // input row
#pragma unroll
  for (int j = 0; j < TILE; j += BLOCK_ROWS) {
    if (x < cols && y + j < rows)
      tile[threadIdx.y + j][threadIdx.x] = in[static_cast<size_t>(y + j) * cols + x];
  }
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;  // output column = input row
  y = blockIdx.x * TILE + threadIdx.y;  // output row = input column
#pragma unroll
  for (int j = 0; j < TILE; j += BLOCK_ROWS) {
    if (x < rows && y + j < cols)
      out[static_cast<size_t>(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
  }
}
