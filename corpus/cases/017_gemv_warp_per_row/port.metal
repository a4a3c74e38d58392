// One SIMD-group per row, SIMDS rows per threadgroup. Each lane reads float4 chunks of the row
// and of x when rows are 16-byte aligned (n % 4 == 0), scalars otherwise; simd_sum replaces the
// shuffle tree. No barrier follows, so a SIMD-group past the last row may simply return.
const uint lane = thread_index_in_simdgroup;
const int row = int(threadgroup_position_in_grid.x) * SIMDS + int(simdgroup_index_in_threadgroup);
const int len = n;
if (row >= rows) return;
const device float* a = A + size_t(row) * len;

float acc = 0.0f;
if ((len & 3) == 0) {
  const device float4* a4 = (const device float4*)a;
  const device float4* x4 = (const device float4*)x;
  for (int i = int(lane); i < len / 4; i += 32) acc += dot(a4[i], x4[i]);
} else {
  for (int i = int(lane); i < len; i += 32) acc = fma(a[i], x[i], acc);
}
acc = simd_sum(acc);
if (lane == 0) y[row] = acc;
