// FlashAttention-2 forward for Apple GPUs: 4 SIMD-groups x 8 query rows (BQ = 32), S = Q K^T and
// O += P V as 8x8 simdgroup_matrix products with float accumulators. Q is staged once in
// threadgroup memory in float, pre-scaled by scale*log2(e) (exp2-domain softmax); K and V tiles
// share one threadgroup buffer (K, then V) to stay within 32 KB at D = 128. Each lane holds two
// columns of one row of every fragment, so the row max needs only two shuffles (lanes ^1, ^8),
// and P is used as the left operand straight from the S accumulators, never through memory.
constexpr int TD = D / 8, TK = BK / 8;
constexpr int LDQ = D + 4;               // 16-byte row padding
constexpr int LDKV = D + 16 / sizeof(T);
threadgroup float Qs[BQ * LDQ];
threadgroup T KVs[BK * LDKV];

const ushort lane = thread_index_in_simdgroup;
const ushort sg = simdgroup_index_in_threadgroup;
const int tid = int(thread_index_in_threadgroup);
const int q_len = Lq, k_len = Lk;
const int q0 = int(threadgroup_position_in_grid.x) * BQ;
const size_t bh = size_t(threadgroup_position_in_grid.z) * threadgroups_per_grid.y +
                  threadgroup_position_in_grid.y;
const device T* qp = q + bh * q_len * D;
const device T* kp = k + bh * k_len * D;
const device T* vp = v + bh * k_len * D;
device T* op = o + bh * q_len * D;
device float* lp = lse + bh * q_len;

const short2 sc = frag_coord(lane);
const int my_row = 8 * sg + sc.y;  // this lane's query row within the tile
const float qscale = scale * 1.4426950408889634f;

for (int i = tid; i < BQ * D / 4; i += 128) {  // 4 consecutive elements per thread
  const int r = i / (D / 4), c = 4 * (i % (D / 4));
  float4 x = float4(0.0f);
  if (q0 + r < q_len) x = float4(*(const device vec<T, 4>*)(qp + size_t(q0 + r) * D + c)) * qscale;
  *(threadgroup float4*)(Qs + r * LDQ + c) = x;
}

simdgroup_float8x8 Of[TD];
for (int dd = 0; dd < TD; ++dd) Of[dd] = make_filled_simdgroup_matrix<float, 8>(0.0f);
float row_max = -INFINITY, row_sum = 0.0f;  // row_sum: this lane's share

const int kv_end = CAUSAL ? min(k_len, q0 + BQ) : k_len;
for (int kv0 = 0; kv0 < kv_end; kv0 += BK) {
  // K tile (zero rows past the end).
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int i = tid; i < BK * D / 4; i += 128) {
    const int r = i / (D / 4), c = 4 * (i % (D / 4));
    vec<T, 4> x = vec<T, 4>(0);
    if (kv0 + r < k_len) x = *(const device vec<T, 4>*)(kp + size_t(kv0 + r) * D + c);
    *(threadgroup vec<T, 4>*)(KVs + r * LDKV + c) = x;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  // S = Q K^T for this SIMD-group's 8 rows and BK keys.
  simdgroup_float8x8 Sf[TK];
  for (int kb = 0; kb < TK; ++kb) Sf[kb] = make_filled_simdgroup_matrix<float, 8>(0.0f);
  for (int dd = 0; dd < TD; ++dd) {
    simdgroup_float8x8 qf;
    simdgroup_load(qf, Qs + 8 * sg * LDQ + 8 * dd, LDQ);
    for (int kb = 0; kb < TK; ++kb) {
      simdgroup_float8x8 kf;
      load_frag<T, LDKV, true>(kf, KVs + 8 * kb * LDKV + 8 * dd, sc);
      simdgroup_multiply_accumulate(Sf[kb], qf, kf, Sf[kb]);
    }
  }

  // Masks only where a tile crosses the sequence end or the causal diagonal.
  if (kv0 + BK > k_len || (CAUSAL && kv0 + BK - 1 > q0)) {
    for (int kb = 0; kb < TK; ++kb) {
      for (int j = 0; j < 2; ++j) {
        const int key = kv0 + 8 * kb + sc.x + j;
        if (key >= k_len || (CAUSAL && key > q0 + my_row)) Sf[kb].thread_elements()[j] = -INFINITY;
      }
    }
  }

  // Online softmax in the exp2 domain; the tile's row max comes from 4 lanes x 2 x TK values.
  float tile_max = -INFINITY;
  for (int kb = 0; kb < TK; ++kb)
    tile_max = max(tile_max, max(Sf[kb].thread_elements()[0], Sf[kb].thread_elements()[1]));
  tile_max = max(tile_max, simd_shuffle_xor(tile_max, 1));
  tile_max = max(tile_max, simd_shuffle_xor(tile_max, 8));
  const float m_new = max(row_max, tile_max);  // finite: key 0 is in the first tile
  const float alpha = fast::exp2(row_max - m_new);
  row_max = m_new;
  float p_sum = 0.0f;
  for (int kb = 0; kb < TK; ++kb) {
    for (int j = 0; j < 2; ++j) {
      const float p = fast::exp2(Sf[kb].thread_elements()[j] - m_new);
      Sf[kb].thread_elements()[j] = p;
      p_sum += p;
    }
  }
  row_sum = row_sum * alpha + p_sum;
  for (int dd = 0; dd < TD; ++dd) Of[dd].thread_elements() *= alpha;

  // V tile into the same buffer, then O += P V.
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int i = tid; i < BK * D / 4; i += 128) {
    const int r = i / (D / 4), c = 4 * (i % (D / 4));
    vec<T, 4> x = vec<T, 4>(0);
    if (kv0 + r < k_len) x = *(const device vec<T, 4>*)(vp + size_t(kv0 + r) * D + c);
    *(threadgroup vec<T, 4>*)(KVs + r * LDKV + c) = x;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int kb = 0; kb < TK; ++kb) {
    for (int dd = 0; dd < TD; ++dd) {
      simdgroup_float8x8 vf;
      load_frag<T, LDKV, false>(vf, KVs + 8 * kb * LDKV + 8 * dd, sc);
      simdgroup_multiply_accumulate(Of[dd], Sf[kb], vf, Of[dd]);
    }
  }
}

row_sum += simd_shuffle_xor(row_sum, 1);
row_sum += simd_shuffle_xor(row_sum, 8);
const int row = q0 + my_row;
if (row < q_len) {
  const float inv = 1.0f / row_sum;
  for (int dd = 0; dd < TD; ++dd) {
    const float2 e = Of[dd].thread_elements() * inv;
    *(device vec<T, 2>*)(op + size_t(row) * D + 8 * dd + sc.x) = vec<T, 2>(e);
  }
  if (sc.x == 0) lp[row] = (row_max + log2(row_sum)) * 0.6931471805599453f;
}
