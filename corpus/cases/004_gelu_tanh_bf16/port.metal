// Grid-stride loop over bfloat2 pairs (bfloat needs MSL 3.1, which MLX requires), math in
// float2, one rounding back to bfloat. The odd last element goes to thread 0, as in CUDA.
// x is read element by element (an input under 8 elements is `constant` in MLX: no cast).
const uint count = uint(n);
const uint pairs = count >> 1;
const uint tid = thread_position_in_grid.x;
const uint stride = threads_per_grid.x;
for (uint i = tid; i < pairs; i += stride) {
  float2 v = float2(float(x[2 * i]), float(x[2 * i + 1]));
  float2 u = 0.7978845608028654f * fma(0.044715f * v, v * v, v);
  ((device bfloat2*)y)[i] = bfloat2(0.5f * v * (1.0f + precise::tanh(u)));
}
if ((count & 1) && tid == 0) {
  float v = float(x[count - 1]);
  float u = 0.7978845608028654f * fma(0.044715f * v, v * v, v);
  y[count - 1] = bfloat(0.5f * v * (1.0f + precise::tanh(u)));
}
