// Decode attention in the sdpa_vector style: one threadgroup of NSG SIMD-groups per (query head,
// batch). SIMD-group g takes keys g, g + NSG, g + 2*NSG, ... so at every step the threadgroup
// streams NSG consecutive key rows; lane i holds D/32 consecutive elements (one vector load).
// Each SIMD-group runs its own exp2-domain online softmax; the merge goes through threadgroup
// memory transposed: lane i of every SIMD-group reads SIMD-group i's (max, sum), so the global
// max and the rescaled sum are one simd_max and one simd_sum, and each SIMD-group finishes
// D/NSG output elements with one simd_sum each.
constexpr int kPer = D / 32;
constexpr int LDO = D + 1;  // lanes read one column of sg_out: pad the rows
threadgroup float sg_max[NSG];
threadgroup float sg_sum[NSG];
threadgroup float sg_out[NSG * LDO];

const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const int head = int(threadgroup_position_in_grid.x), batch = int(threadgroup_position_in_grid.y);
const int q_heads = int(threadgroups_per_grid.x);
const int len = L, group = gqa;
const size_t kv_head = size_t(batch) * (q_heads / group) + head / group;
const size_t qo = (size_t(batch) * q_heads + head) * D;
const device T* kp = k + kv_head * len * D + lane * kPer;
const device T* vp = v + kv_head * len * D + lane * kPer;

const float qscale = scale * 1.4426950408889634f;
const vec<float, kPer> qr = vec<float, kPer>(*(const device vec<T, kPer>*)(q + qo + lane * kPer)) * qscale;
vec<float, kPer> acc = vec<float, kPer>(0.0f);
float m = -INFINITY, l = 0.0f;

for (int t = int(sg); t < len; t += NSG) {
  const vec<float, kPer> kt = vec<float, kPer>(*(const device vec<T, kPer>*)(kp + size_t(t) * D));
  const float s = simd_sum(dot(qr, kt));
  const float m_new = max(m, s);
  const float alpha = fast::exp2(m - m_new), p = fast::exp2(s - m_new);
  l = l * alpha + p;
  m = m_new;
  const vec<float, kPer> vt = vec<float, kPer>(*(const device vec<T, kPer>*)(vp + size_t(t) * D));
  acc = acc * alpha + p * vt;
}

if (lane == 0) {
  sg_max[sg] = m;
  sg_sum[sg] = l;
}
for (int i = 0; i < kPer; ++i) sg_out[sg * LDO + lane * kPer + i] = acc[i];
threadgroup_barrier(mem_flags::mem_threadgroup);

// Lane i speaks for SIMD-group i (NSG == 32).
const float m_i = sg_max[lane];
const float m_all = simd_max(m_i);
const float f_i = fast::exp2(m_i - m_all);  // 0 for a SIMD-group that got no keys
const float inv_den = 1.0f / simd_sum(sg_sum[lane] * f_i);
for (int d = int(sg); d < D; d += NSG) {
  const float num = simd_sum(sg_out[lane * LDO + d] * f_i);
  if (lane == 0) o[qo + d] = T(num * inv_den);
}
