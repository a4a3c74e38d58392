// One threadgroup per row. Logits are read as bfloat and widened to float (M1/M2 have no bfloat
// ALUs). The softmax runs in the exp2 domain: scores are scaled by log2(e) once, so every
// exponential is a native exp2. Each thread keeps a running (max, sum) over N_READS consecutive
// elements per step; SIMD-groups merge with simd_max/simd_sum, then through threadgroup memory.
constexpr int kSimds = BLOCK / 32;
constexpr float kLog2e = 1.4426950408889634f;
threadgroup float simd_max_tg[kSimds];
threadgroup float simd_sum_tg[kSimds];
const uint row = threadgroup_position_in_grid.x;
const int tid = int(thread_index_in_threadgroup);
const int len = vocab;
const device bfloat16_t* xr = logits + size_t(row) * len;
device bfloat16_t* dr = dlogits + size_t(row) * len;
const int label = labels[row];

if (label < 0) {  // uniform over the threadgroup, and no barrier follows on this path
  for (int i = tid; i < len; i += BLOCK) dr[i] = bfloat16_t(0.0f);
  return;
}

float m = -INFINITY, s = 0.0f;
for (int i = tid * N_READS; i < len; i += BLOCK * N_READS) {
  float v[N_READS];
  float vmax = -INFINITY;
  for (int k = 0; k < N_READS; ++k) {
    v[k] = i + k < len ? float(xr[i + k]) * kLog2e : -INFINITY;
    vmax = max(vmax, v[k]);
  }
  const float m_new = max(m, vmax);
  s *= exp2(m - m_new);  // m_new is finite: element i < len exists
  for (int k = 0; k < N_READS; ++k) s += exp2(v[k] - m_new);
  m = m_new;
}
// SIMD-group merge: rescale every lane's sum to the group max, then add.
float gm = simd_max(m);
s = simd_sum(m == -INFINITY ? 0.0f : s * exp2(m - gm));
if (thread_index_in_simdgroup == 0) {
  simd_max_tg[simdgroup_index_in_threadgroup] = gm;
  simd_sum_tg[simdgroup_index_in_threadgroup] = s;
}
threadgroup_barrier(mem_flags::mem_threadgroup);
float row_max = -INFINITY;
for (int k = 0; k < kSimds; ++k) row_max = max(row_max, simd_max_tg[k]);
float row_sum = 0.0f;
for (int k = 0; k < kSimds; ++k) {
  const float mk = simd_max_tg[k];
  row_sum += mk == -INFINITY ? 0.0f : simd_sum_tg[k] * exp2(mk - row_max);
}
const float lse2 = row_max + log2(row_sum);  // log-sum-exp in the log2 domain

for (int i = tid * N_READS; i < len; i += BLOCK * N_READS) {
  for (int k = 0; k < N_READS && i + k < len; ++k) {
    const float p = exp2(float(xr[i + k]) * kLog2e - lse2);
    dr[i + k] = bfloat16_t((p - (i + k == label ? 1.0f : 0.0f)) * grad_scale);
  }
}
