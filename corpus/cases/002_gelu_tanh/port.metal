// One thread per 4 elements, as the CUDA kernel: a float4 load/store in the body, scalars in
// the tail. precise::tanh because Metal's default fp32 tanh is the fast approximation.
// x is read element by element: MLX passes an input of fewer than 8 elements as `constant`,
// and a cast to `const device float4*` would not compile then.
const uint base = 4 * thread_position_in_grid.x;
const uint count = uint(n);
if (base + 3 < count) {
  float4 v = float4(x[base], x[base + 1], x[base + 2], x[base + 3]);
  float4 u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
  ((device float4*)y)[base >> 2] = 0.5f * v * (1.0f + precise::tanh(u));
} else {
  for (uint i = base; i < count; ++i) {
    float v = x[i];
    float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    y[i] = 0.5f * v * (1.0f + precise::tanh(u));
  }
}
