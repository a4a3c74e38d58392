// param, exp_avg and exp_avg_sq are inout in CUDA: read from the inputs, written to the
// *_out outputs (MLX outputs are fresh arrays, so every element, tail included, is written).
// One thread per 4 elements; the grid is exactly ceil(n/4) threads, so no thread is idle and the
// last thread does the n % 4 tail. Bias corrections use precise::pow: Metal's default pow is the
// fast exp2(y*log2(x)) form, and 1 - beta2^t cancels most of its digits. Inputs are read
// element by element: MLX passes one under 8 elements as `constant` (no cast to device).
const int n_elems = n;
const int iv = int(thread_position_in_grid.x);
const float bc1 = 1.0f - precise::pow(beta1, float(step));
const float bc2 = 1.0f - precise::pow(beta2, float(step));
const float step_size = lr / bc1, inv_sqrt_bc2 = rsqrt(bc2);
const float lr_decay = 1.0f - lr * weight_decay;

if (4 * iv + 4 <= n_elems) {
  const int j = 4 * iv;
  float4 p = float4(param[j], param[j + 1], param[j + 2], param[j + 3]);
  float4 m = float4(exp_avg[j], exp_avg[j + 1], exp_avg[j + 2], exp_avg[j + 3]);
  float4 v = float4(exp_avg_sq[j], exp_avg_sq[j + 1], exp_avg_sq[j + 2], exp_avg_sq[j + 3]);
  const float4 g = float4(float(grad[j]), float(grad[j + 1]), float(grad[j + 2]), float(grad[j + 3]));
  m = beta1 * m + (1.0f - beta1) * g;
  v = beta2 * v + (1.0f - beta2) * g * g;
  p = p * lr_decay - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps);
  ((device float4*)param_out)[iv] = p;
  ((device float4*)exp_avg_out)[iv] = m;
  ((device float4*)exp_avg_sq_out)[iv] = v;
} else {
  for (int i = 4 * iv; i < n_elems; ++i) {
    const float g = float(grad[i]);
    const float m = beta1 * exp_avg[i] + (1.0f - beta1) * g;
    const float v = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
    param_out[i] = param[i] * lr_decay - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps);
    exp_avg_out[i] = m;
    exp_avg_sq_out[i] = v;
  }
}
