// One thread per 4 elements, as the CUDA kernel: a float4 load/store in the body, scalars in
// the tail. precise::tanh because Metal's default fp32 tanh is the fast approximation.
const uint base = 4 * thread_position_in_grid.x;
const uint count = uint(n);
if (base + 3 < count) {
  float4 v = ((const device float4*)x)[base >> 2];
  float4 u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
  ((device float4*)y)[base >> 2] = 0.5f * v * (1.0f + precise::tanh(u));
} else {
  for (uint i = base; i < count; ++i) {
    float v = x[i];
    float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    y[i] = 0.5f * v * (1.0f + precise::tanh(u));
  }
}
