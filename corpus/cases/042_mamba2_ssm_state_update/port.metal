// Like mlx-lm's ssm_kernel: grid (32, P, B*H) threads with threadgroups of 32 x ROWS, so one
// SIMD-group per state row p. MLX grids are in threads and Apple GPUs shrink the last
// threadgroup, so rows past P are never launched and no bounds check is needed. Lane i owns N/32
// consecutive states (float4 loads); y is one simd_sum. state is inout in CUDA: it is read from
// the `state` input and every entry is written to `state_out`.
constexpr int kVec = N / 128;  // float4s per lane
const uint lane = thread_index_in_simdgroup;
const int p = int(thread_position_in_grid.y);
const int rows = int(threads_per_grid.y);  // P
const int bh = int(thread_position_in_grid.z);  // batch * heads + head
const int heads = H, groups = G;
const int head = bh % heads, batch = bh / heads;
const size_t bg = size_t(batch) * groups + head / (heads / groups);

const float xv = x[size_t(bh) * rows + p];
const float dt_in = dt[bh] + dt_bias[head];
const float dtv = dt_in > 20.0f ? dt_in : log1p(exp(dt_in));
const float dA = exp(-exp(A_log[head]) * dtv);
const float dBx = dtv * xv;

const size_t row = (size_t(bh) * rows + p) * N;
const device float4* s_in = (const device float4*)(state + row);
device float4* s_out = (device float4*)(state_out + row);
const device float4* Bv = (const device float4*)(B + bg * N);
const device float4* Cv = (const device float4*)(C + bg * N);
float acc = 0.0f;
for (int j = 0; j < kVec; ++j) {
  const int i = j * 32 + int(lane);
  const float4 s = s_in[i] * dA + dBx * Bv[i];
  s_out[i] = s;
  acc += dot(s, Cv[i]);
}
acc = simd_sum(acc);
if (lane == 0) y[size_t(bh) * rows + p] = acc + D[head] * xv;
