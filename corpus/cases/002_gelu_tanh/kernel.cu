// GELU, tanh approximation: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Each thread owns 4 consecutive elements: one float4 load/store when all 4 are in range,
// a scalar loop for the ragged tail (n need not be a multiple of 4).
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr float kCoeff = 0.044715f;
  const float inner = kSqrt2OverPi * (x + kCoeff * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

extern "C" __global__ void gelu_tanh_f32(const float* __restrict__ x, float* __restrict__ y,
                                         int n) {
  const int base = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (base + 3 < n) {
    float4 v = reinterpret_cast<const float4*>(x)[base >> 2];
    v.x = gelu_tanh(v.x);
    v.y = gelu_tanh(v.y);
    v.z = gelu_tanh(v.z);
    v.w = gelu_tanh(v.w);
    reinterpret_cast<float4*>(y)[base >> 2] = v;
  } else {
    for (int i = base; i < n; ++i) y[i] = gelu_tanh(x[i]);
  }
}
