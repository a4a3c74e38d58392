// Selective scan for Apple GPUs: one threadgroup of NSG SIMD-groups per (channel, batch).
// Lanes walk time (lane j owns NITEMS consecutive steps of a 32*NITEMS-step chunk) and
// SIMD-groups split the states (each owns N/NSG of them), so every state's scan across the chunk
// is a pure SIMD-group scan (simd_shuffle_up of (a, b) pairs) and its carry between chunks stays
// in a register of every lane: no threadgroup memory or barrier inside the scan. Threadgroup
// memory is used once per chunk: u and softplus(dt) are staged by the whole threadgroup, and the
// SIMD-groups' partial outputs (their states' share of C.h) are added up there.
constexpr int CHUNK = 32 * NITEMS, SPG = N / NSG;  // steps per chunk, states per SIMD-group
constexpr int kThreads = 32 * NSG;
threadgroup float s_u[CHUNK], s_dt[CHUNK];
threadgroup float s_y[NSG][CHUNK];

const uint lane = thread_index_in_simdgroup, sg = simdgroup_index_in_threadgroup;
const int tid = int(thread_index_in_threadgroup);
const int dim = int(threadgroup_position_in_grid.x), n_dim = int(threadgroups_per_grid.x);
const int batch = int(threadgroup_position_in_grid.y);
const int len = L;
const size_t row = (size_t(batch) * n_dim + dim) * len;
const device float* Bb = B + size_t(batch) * N * len;
const device float* Cb = C + size_t(batch) * N * len;
const float d_skip = D[dim], bias = delta_bias[dim];

float A2[SPG], carry[SPG];
for (int j = 0; j < SPG; ++j) {
  A2[j] = A[dim * N + int(sg) * SPG + j] * M_LOG2E_F;
  carry[j] = 0.0f;
}

for (int t0 = 0; t0 < len; t0 += CHUNK) {
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int i = tid; i < CHUNK; i += kThreads) {
    const bool in = t0 + i < len;
    const float x = in ? delta[row + t0 + i] + bias : 0.0f;
    s_u[i] = in ? u[row + t0 + i] : 0.0f;
    s_dt[i] = in ? (x > 20.0f ? x : log1p(exp(x))) : 0.0f;  // padding: dt = 0, the identity
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  const int i0 = int(lane) * NITEMS;  // this lane's first step in the chunk
  float du[NITEMS], dtv[NITEMS], y[NITEMS];
  for (int i = 0; i < NITEMS; ++i) {
    dtv[i] = s_dt[i0 + i];
    du[i] = dtv[i] * s_u[i0 + i];
    y[i] = 0.0f;
  }

  for (int j = 0; j < SPG; ++j) {
    const int n = int(sg) * SPG + j;
    float a[NITEMS], b[NITEMS], c[NITEMS];
    float2 f = float2(1.0f, 0.0f);  // this lane's steps folded: h -> f.x * h + f.y
    for (int i = 0; i < NITEMS; ++i) {
      const int t = t0 + i0 + i;
      a[i] = exp2(dtv[i] * A2[j]);
      b[i] = t < len ? du[i] * Bb[size_t(n) * len + t] : 0.0f;
      c[i] = t < len ? Cb[size_t(n) * len + t] : 0.0f;
      f = float2(a[i] * f.x, a[i] * f.y + b[i]);
    }
    // Inclusive scan over the lanes (Hillis-Steele on the affine pairs).
    for (ushort off = 1; off < 32; off <<= 1) {
      const float2 p = simd_shuffle_up(f, off);
      if (lane >= off) f = float2(f.x * p.x, f.x * p.y + f.y);
    }
    const float2 total = simd_shuffle(f, 31);
    float2 excl = simd_shuffle_up(f, 1);
    if (lane == 0) excl = float2(1.0f, 0.0f);
    float h = excl.x * carry[j] + excl.y;
    for (int i = 0; i < NITEMS; ++i) {
      h = a[i] * h + b[i];
      y[i] = fma(h, c[i], y[i]);
    }
    carry[j] = total.x * carry[j] + total.y;
  }

  for (int i = 0; i < NITEMS; ++i) s_y[sg][i0 + i] = y[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int i = tid; i < CHUNK && t0 + i < len; i += kThreads) {
    float acc = d_skip * s_u[i];
    for (int s = 0; s < NSG; ++s) acc += s_y[s][i];
    out[row + t0 + i] = acc;
  }
}

if (lane == 0) {
  for (int j = 0; j < SPG; ++j)
    last_state[(size_t(batch) * n_dim + dim) * N + int(sg) * SPG + j] = carry[j];
}
