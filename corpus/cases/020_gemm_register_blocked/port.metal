// BM x BN tile of C per threadgroup of 4 SIMD-groups in a 2 x 2 layout; each SIMD-group holds
// its (BM/2) x (BN/2) sub-tile in registers as a grid of 8x8 simdgroup_float8x8 accumulators.
// Tiles of A (BM x BK) and B (BK x BN) are staged in threadgroup memory with 16-byte row padding,
// read from device memory as float4 where a chunk is in range and aligned, else per element.
constexpr int kPad = 4;
constexpr int kThreads = 128;
constexpr int FM = BM / 16, FN = BN / 16;  // 8x8 fragments per SIMD-group, down and across
threadgroup float As[BM][BK + kPad];
threadgroup float Bs[BK][BN + kPad];
const int tid = int(thread_index_in_threadgroup);
const int sg = int(simdgroup_index_in_threadgroup);
const int sg_row = (sg / 2) * (BM / 2), sg_col = (sg % 2) * (BN / 2);
const int row0 = int(threadgroup_position_in_grid.y) * BM;
const int col0 = int(threadgroup_position_in_grid.x) * BN;
const int m = M, nc = N, kd = K;

simdgroup_float8x8 acc[FM][FN];
for (int i = 0; i < FM; ++i)
  for (int j = 0; j < FN; ++j) acc[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);

for (int k0 = 0; k0 < kd; k0 += BK) {
  for (int q = tid; q < BM * BK / 4; q += kThreads) {  // float4 chunks of the A tile
    const int r = q / (BK / 4), c = (q % (BK / 4)) * 4, gr = row0 + r, gk = k0 + c;
    if (gr < m && gk + 4 <= kd && (kd & 3) == 0) {
      const float4 v = *(const device float4*)(A + size_t(gr) * kd + gk);
      for (int e = 0; e < 4; ++e) As[r][c + e] = v[e];
    } else {
      for (int e = 0; e < 4; ++e)
        As[r][c + e] = (gr < m && gk + e < kd) ? A[size_t(gr) * kd + gk + e] : 0.0f;
    }
  }
  for (int q = tid; q < BK * BN / 4; q += kThreads) {  // float4 chunks of the B tile
    const int r = q / (BN / 4), c = (q % (BN / 4)) * 4, gk = k0 + r, gc = col0 + c;
    if (gk < kd && gc + 4 <= nc && (nc & 3) == 0) {
      const float4 v = *(const device float4*)(B + size_t(gk) * nc + gc);
      for (int e = 0; e < 4; ++e) Bs[r][c + e] = v[e];
    } else {
      for (int e = 0; e < 4; ++e)
        Bs[r][c + e] = (gk < kd && gc + e < nc) ? B[size_t(gk) * nc + gc + e] : 0.0f;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int kk = 0; kk < BK; kk += 8) {
    simdgroup_float8x8 af[FM], bf[FN];
    for (int i = 0; i < FM; ++i) simdgroup_load(af[i], &As[sg_row + 8 * i][kk], BK + kPad);
    for (int j = 0; j < FN; ++j) simdgroup_load(bf[j], &Bs[kk][sg_col + 8 * j], BN + kPad);
    for (int i = 0; i < FM; ++i)
      for (int j = 0; j < FN; ++j)
        simdgroup_multiply_accumulate(acc[i][j], af[i], bf[j], acc[i][j]);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
}

// Whole sub-tiles go out with simdgroup_store; edge ones element by element, each lane writing
// the two elements it holds (MLX's fragment layout: row (q&4) + (l/2)%4, columns (q&2)*2 + (l%2)*2
// and +1, with q = l/4).
const int r0 = row0 + sg_row, c0 = col0 + sg_col;
if (r0 + BM / 2 <= m && c0 + BN / 2 <= nc) {
  for (int i = 0; i < FM; ++i)
    for (int j = 0; j < FN; ++j)
      simdgroup_store(acc[i][j], C + size_t(r0 + 8 * i) * nc + c0 + 8 * j, nc);
} else {
  const int l = int(thread_index_in_simdgroup), q = l / 4;
  const int fr = (q & 4) + (l / 2) % 4, fc = (q & 2) * 2 + (l % 2) * 2;
  for (int i = 0; i < FM; ++i) {
    const int r = r0 + 8 * i + fr;
    for (int j = 0; j < FN; ++j) {
      const int c = c0 + 8 * j + fc;
      const auto v = acc[i][j].thread_elements();
      if (r < m && c < nc) C[size_t(r) * nc + c] = v[0];
      if (r < m && c + 1 < nc) C[size_t(r) * nc + c + 1] = v[1];
    }
  }
}
