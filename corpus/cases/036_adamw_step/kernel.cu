// One AdamW step (decoupled weight decay, bias-corrected moments), fp32 master weights and
// moments updated in place, bf16 gradients:
//   p *= 1 - lr*wd;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Each thread updates 4 consecutive elements with float4 / bf16x2 loads; the thread just past
// the last whole vector does the n % 4 tail.
#include <cuda_bf16.h>

__device__ __forceinline__ float adamw_one(float& p, float g, float& m, float& v, float lr_decay,
                                           float beta1, float beta2, float step_size,
                                           float inv_sqrt_bc2, float eps) {
  m = beta1 * m + (1.0f - beta1) * g;
  v = beta2 * v + (1.0f - beta2) * g * g;
  const float denom = sqrtf(v) * inv_sqrt_bc2 + eps;
  p = p * lr_decay - step_size * m / denom;
  return p;
}

__global__ void __launch_bounds__(256)
adamw_step(float* __restrict__ param, const __nv_bfloat16* __restrict__ grad,
           float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, float lr, float beta1,
           float beta2, float eps, float weight_decay, int step, int n) {
  const float bc1 = 1.0f - powf(beta1, (float)step);
  const float bc2 = 1.0f - powf(beta2, (float)step);
  const float step_size = lr / bc1, inv_sqrt_bc2 = rsqrtf(bc2);
  const float lr_decay = 1.0f - lr * weight_decay;

  const int vec = blockIdx.x * blockDim.x + threadIdx.x;
  const int n_vec = n / 4;
  if (vec < n_vec) {
    float4 p = reinterpret_cast<float4*>(param)[vec];
    float4 m = reinterpret_cast<float4*>(exp_avg)[vec];
    float4 v = reinterpret_cast<float4*>(exp_avg_sq)[vec];
    const __nv_bfloat162 g01 = reinterpret_cast<const __nv_bfloat162*>(grad)[2 * vec];
    const __nv_bfloat162 g23 = reinterpret_cast<const __nv_bfloat162*>(grad)[2 * vec + 1];
    const float2 ga = __bfloat1622float2(g01), gb = __bfloat1622float2(g23);
    adamw_one(p.x, ga.x, m.x, v.x, lr_decay, beta1, beta2, step_size, inv_sqrt_bc2, eps);
    adamw_one(p.y, ga.y, m.y, v.y, lr_decay, beta1, beta2, step_size, inv_sqrt_bc2, eps);
    adamw_one(p.z, gb.x, m.z, v.z, lr_decay, beta1, beta2, step_size, inv_sqrt_bc2, eps);
    adamw_one(p.w, gb.y, m.w, v.w, lr_decay, beta1, beta2, step_size, inv_sqrt_bc2, eps);
    reinterpret_cast<float4*>(param)[vec] = p;
    reinterpret_cast<float4*>(exp_avg)[vec] = m;
    reinterpret_cast<float4*>(exp_avg_sq)[vec] = v;
  } else if (vec == n_vec) {
    for (int i = 4 * n_vec; i < n; ++i) {
      adamw_one(param[i], __bfloat162float(grad[i]), exp_avg[i], exp_avg_sq[i], lr_decay, beta1,
                beta2, step_size, inv_sqrt_bc2, eps);
    }
  }
}
