// A 32 x 32 tile of C per threadgroup of 4 SIMD-groups (2 x 2); each SIMD-group owns a 16 x 16
// quarter as 2 x 2 simdgroup_float8x8 accumulators, fed by simdgroup_half8x8 fragments
// (Apple GPUs have only 8x8 matrices: one m16n16k16 wmma is 2 x 2 outputs x 2 k-steps = 8
// simdgroup_multiply_accumulate). A and B are staged per BK-deep step in threadgroup memory,
// zero-filled past the edges, with rows padded by 8 halves (16 bytes). Whole tiles are stored
// straight to device memory; edge tiles per element through thread_elements().
constexpr int kTile = 32, kPad = 8, kThreads = 128;
threadgroup half As[kTile][BK + kPad];
threadgroup half Bs[BK][kTile + kPad];
const int tid = int(thread_index_in_threadgroup);
const int sg = int(simdgroup_index_in_threadgroup);
const int wr = (sg / 2) * 16, wc = (sg % 2) * 16;
const int row0 = int(threadgroup_position_in_grid.y) * kTile;
const int col0 = int(threadgroup_position_in_grid.x) * kTile;
const int m = M, nc = N, kd = K;

simdgroup_float8x8 acc[2][2];
for (int i = 0; i < 2; ++i)
  for (int j = 0; j < 2; ++j) acc[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);

for (int k0 = 0; k0 < kd; k0 += BK) {
  for (int i = tid; i < kTile * BK; i += kThreads) {
    const int r = i / BK, c = i % BK;
    As[r][c] = (row0 + r < m && k0 + c < kd) ? A[size_t(row0 + r) * kd + k0 + c] : half(0);
    const int br = i / kTile, bc = i % kTile;
    Bs[br][bc] = (k0 + br < kd && col0 + bc < nc) ? B[size_t(k0 + br) * nc + col0 + bc] : half(0);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int kk = 0; kk < BK; kk += 8) {
    simdgroup_half8x8 af[2], bf[2];
    for (int i = 0; i < 2; ++i) simdgroup_load(af[i], &As[wr + 8 * i][kk], BK + kPad);
    for (int j = 0; j < 2; ++j) simdgroup_load(bf[j], &Bs[kk][wc + 8 * j], kTile + kPad);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) simdgroup_multiply_accumulate(acc[i][j], af[i], bf[j], acc[i][j]);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
}

const int r0 = row0 + wr, c0 = col0 + wc;
if (r0 + 16 <= m && c0 + 16 <= nc) {
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      simdgroup_store(acc[i][j], C + size_t(r0 + 8 * i) * nc + c0 + 8 * j, nc);
} else {
  // MLX's fragment layout: lane l holds row (q&4) + (l/2)%4, columns (q&2)*2 + (l%2)*2 and +1.
  const int l = int(thread_index_in_simdgroup), q = l / 4;
  const int fr = (q & 4) + (l / 2) % 4, fc = (q & 2) * 2 + (l % 2) * 2;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      const int r = r0 + 8 * i + fr, c = c0 + 8 * j + fc;
      const auto v = acc[i][j].thread_elements();
      if (r < m && c < nc) C[size_t(r) * nc + c] = v[0];
      if (r < m && c + 1 < nc) C[size_t(r) * nc + c + 1] = v[1];
    }
}
