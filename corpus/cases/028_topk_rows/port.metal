// Same three stages. A SIMD-group argmax is two reductions instead of a 5-step butterfly on
// pairs: simd_max of the heads, then simd_min of the indices of the lanes whose head equals it
// (the smallest index wins ties). K and SIMDS are template arguments.
constexpr int kNone = 0x7fffffff;
const float kNegInf = -numeric_limits<float>::infinity();
threadgroup float cand_v[SIMDS * K];
threadgroup int cand_i[SIMDS * K];
const int lane = int(thread_index_in_simdgroup), sg = int(simdgroup_index_in_threadgroup);
const int len = n;
const device float* row = x + size_t(threadgroup_position_in_grid.x) * len;

float v[K];
int id[K];
for (int r = 0; r < K; ++r) v[r] = kNegInf, id[r] = kNone;
for (int i = int(thread_index_in_threadgroup); i < len; i += SIMDS * 32) {
  const float e = row[i];
  if (e > v[K - 1]) {
    v[K - 1] = e, id[K - 1] = i;
#pragma unroll
    for (int r = K - 1; r > 0; --r) {  // static indices keep the lists in registers
      const bool up = v[r] > v[r - 1];
      const float tv = v[r], ov = v[r - 1];
      const int ti = id[r], oi = id[r - 1];
      v[r] = up ? ov : tv, v[r - 1] = up ? tv : ov;
      id[r] = up ? oi : ti, id[r - 1] = up ? ti : oi;
    }
  }
}

for (int r = 0; r < K; ++r) {
  const float bv = simd_max(v[0]);
  const int bi = simd_min(v[0] == bv ? id[0] : kNone);
  if (id[0] == bi) {
#pragma unroll
    for (int s = 0; s < K - 1; ++s) v[s] = v[s + 1], id[s] = id[s + 1];
    v[K - 1] = kNegInf, id[K - 1] = kNone;
  }
  if (lane == 0) cand_v[sg * K + r] = bv, cand_i[sg * K + r] = bi;
}
threadgroup_barrier(mem_flags::mem_threadgroup);
if (sg != 0) return;  // no barrier follows

float cv = lane < SIMDS * K ? cand_v[lane] : kNegInf;
int ci = lane < SIMDS * K ? cand_i[lane] : kNone;
const size_t out = size_t(threadgroup_position_in_grid.x) * K;
for (int r = 0; r < K; ++r) {
  const float bv = simd_max(cv);
  const int bi = simd_min(cv == bv ? ci : kNone);
  if (ci == bi) cv = kNegInf, ci = kNone;
  if (lane == 0) {
    values[out + r] = bv;
    indices[out + r] = bi;
  }
}
