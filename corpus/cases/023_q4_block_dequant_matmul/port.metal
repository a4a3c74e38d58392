// One SIMD-group per output row n; a lane takes one 32-weight block per step. The block's
// 16 nibble bytes arrive as one uint4 load and are unpacked four at a time as uchar4 vectors;
// the -8 offset is factored out of the dot product (sum x*(q-8) = sum x*q - 8*sum x) and the
// half scale multiplies once per block and activation row, not once per weight.
constexpr int kBlock = 32;
const uint lane = thread_index_in_simdgroup;
const int n = int(threadgroup_position_in_grid.x) * SIMDS + int(simdgroup_index_in_threadgroup);
const int rows = M, cols = N, kd = K;
if (n >= cols) return;  // no barrier follows
const int nblocks = kd / kBlock;
const device uint4* row_q = (const device uint4*)(qs + size_t(n) * (kd / 2));
const device half* row_d = d + size_t(n) * nblocks;

float acc[MAX_M];
for (int m = 0; m < MAX_M; ++m) acc[m] = 0.0f;
for (int b = int(lane); b < nblocks; b += 32) {
  const uint4 raw = row_q[b];
  float4 lo[4], hi[4];  // weights 4c..4c+3 and 16+4c..16+4c+3, as unsigned nibbles
  for (int c = 0; c < 4; ++c) {
    const uchar4 bytes = as_type<uchar4>(raw[c]);
    lo[c] = float4(bytes & uchar4(0xF));
    hi[c] = float4(bytes >> uchar4(4));
  }
  const float scale = float(row_d[b]);
  for (int m = 0; m < MAX_M; ++m) {
    if (m < rows) {
      const device float4* x4 = (const device float4*)(X + size_t(m) * kd + b * kBlock);
      float sq = 0.0f, sx = 0.0f;
      for (int c = 0; c < 4; ++c) {
        const float4 xl = x4[c], xh = x4[4 + c];
        sq += dot(xl, lo[c]) + dot(xh, hi[c]);
        sx += (xl.x + xl.y) + (xl.z + xl.w) + (xh.x + xh.y) + (xh.z + xh.w);
      }
      acc[m] = fma(scale, sq - 8.0f * sx, acc[m]);
    }
  }
}
for (int m = 0; m < MAX_M; ++m) {
  const float v = simd_sum(acc[m]);
  if (lane == 0 && m < rows) Y[size_t(m) * cols + n] = v;
}
