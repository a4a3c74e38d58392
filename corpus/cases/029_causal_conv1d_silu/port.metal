// Each thread makes 4 consecutive outputs from a 7-value sliding window in registers, so no
// threadgroup memory or barrier is needed: the 3 steps of history come from the previous float4
// (one extra load that the cache serves to the neighbouring thread as well). Rows whose L is not
// a multiple of 4 are not 16-byte aligned and take scalar, bounds-checked loads. The 4 taps of
// a channel are one float4 load.
const int q = int(thread_position_in_grid.x);  // outputs 4q .. 4q + 3
const int row = int(thread_position_in_grid.y);
const int len = L, t = 4 * q;
if (t >= len) return;
const device float* xr = x + size_t(row) * len;
const float4 wd = ((const device float4*)w)[row % D];
const float b = bias[row % D];

float win[7];  // x[t - 3] .. x[t + 3]
if ((len & 3) == 0) {
  const float4 cur = ((const device float4*)xr)[q];
  const float4 prev = q > 0 ? ((const device float4*)xr)[q - 1] : float4(0.0f);
  win[0] = prev.y, win[1] = prev.z, win[2] = prev.w;
  win[3] = cur.x, win[4] = cur.y, win[5] = cur.z, win[6] = cur.w;
} else {
  for (int j = 0; j < 7; ++j) {
    const int s = t - 3 + j;
    win[j] = (s >= 0 && s < len) ? xr[s] : 0.0f;
  }
}
float y[4];
for (int o = 0; o < 4; ++o) {
  float acc = b;
  acc += wd.x * win[o];
  acc += wd.y * win[o + 1];
  acc += wd.z * win[o + 2];
  acc += wd.w * win[o + 3];
  y[o] = acc / (1.0f + exp(-acc));
}
device float* outr = out + size_t(row) * len;
if ((len & 3) == 0) {
  ((device float4*)outr)[q] = float4(y[0], y[1], y[2], y[3]);
} else {
  for (int o = 0; o < 4 && t + o < len; ++o) outr[t + o] = y[o];
}
