// Broadcast bias-add over rows: y[r, c] = x[r, c] + bias[c] for x of shape [rows, cols].
// 2-D blocks: x walks columns (coalesced), y walks rows with a grid-stride loop, so each thread
// loads its bias element once and reuses it for every row it visits.
extern "C" __global__ void bias_add_rows(const float* __restrict__ x,
                                         const float* __restrict__ bias,
                                         float* __restrict__ y, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const float b = __ldg(&bias[c]);
  for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y) {
    const size_t idx = static_cast<size_t>(r) * cols + c;
    y[idx] = x[idx] + b;
  }
}
