// One SIMD-group per output row n, SIMDS rows per threadgroup; MAX_M (a template argument)
// bounds the activation rows kept in registers. When K % 16 == 0 a lane reads 16 int8 weights
// at once (one uint4 load, viewed as four char4) and the matching x as float4s; otherwise one
// weight at a time. Each row's sum is a simd_sum; the per-row scale multiplies the total once.
const uint lane = thread_index_in_simdgroup;
const int n = int(threadgroup_position_in_grid.x) * SIMDS + int(simdgroup_index_in_threadgroup);
const int rows = M, cols = N, kd = K;
if (n >= cols) return;  // no barrier follows
const device int8_t* w = W + size_t(n) * kd;

float acc[MAX_M];
for (int m = 0; m < MAX_M; ++m) acc[m] = 0.0f;
if ((kd & 15) == 0) {
  const device uint4* w16 = (const device uint4*)w;
  for (int i = int(lane); i < kd / 16; i += 32) {
    const uint4 packed = w16[i];
    float4 wf[4];
    for (int c = 0; c < 4; ++c) wf[c] = float4(as_type<char4>(packed[c]));
    for (int m = 0; m < MAX_M; ++m) {
      if (m < rows) {
        const device float4* x4 = (const device float4*)(X + size_t(m) * kd) + 4 * i;
        for (int c = 0; c < 4; ++c) acc[m] += dot(x4[c], wf[c]);
      }
    }
  }
} else {
  for (int k = int(lane); k < kd; k += 32) {
    const float wf = float(w[k]);
    for (int m = 0; m < MAX_M; ++m)
      if (m < rows) acc[m] = fma(X[size_t(m) * kd + k], wf, acc[m]);
  }
}
const float s = scale[n];
for (int m = 0; m < MAX_M; ++m) {
  const float v = simd_sum(acc[m]);
  if (lane == 0 && m < rows) Y[size_t(m) * cols + n] = v * s;
}
