// Mamba-2 single-step (decode) SSM state update, scalar A per head, grouped B/C:
//   dt' = softplus(dt + dt_bias),  dA = exp(dt' * A),  A = -exp(A_log)
//   state[p, :] = dA * state[p, :] + (dt' * x[p]) * B[g, :]
//   y[p] = state[p, :] . C[g, :] + D * x[p]          (g = head / (heads / groups))
// x, y: [B, H, P]; dt: [B, H]; B, C: [B, G, N]; state: [B, H, P, N], updated in place.
// One warp per row p: lane i owns N/32 consecutive states (float4 loads), the dot product is a
// warp shuffle reduction. A block holds ROWS warps (rows) of one (head, batch).

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

template <int NSTATE, int ROWS>
__global__ void __launch_bounds__(32 * ROWS)
mamba2_state_update(const float* __restrict__ x, const float* __restrict__ dt,
                    const float* __restrict__ dt_bias, const float* __restrict__ A_log,
                    const float* __restrict__ B, const float* __restrict__ C,
                    const float* __restrict__ D, float* __restrict__ state,
                    float* __restrict__ y, int P, int G) {
  constexpr int kVec = NSTATE / 128;  // float4s per lane
  static_assert(NSTATE % 128 == 0, "d_state must be a multiple of 128");
  const int lane = threadIdx.x;
  const int p = blockIdx.x * ROWS + threadIdx.y;
  const int head = blockIdx.y, heads = gridDim.y, batch = blockIdx.z;
  if (p >= P) return;  // whole warps only; no block-level sync follows

  const size_t bh = (size_t)batch * heads + head;
  const size_t bg = (size_t)batch * G + head / (heads / G);
  const float xv = x[bh * P + p];
  const float dtv = softplus(dt[bh] + dt_bias[head]);
  const float dA = expf(-expf(A_log[head]) * dtv);
  const float dBx = dtv * xv;

  float4* __restrict__ st = reinterpret_cast<float4*>(state + (bh * P + p) * NSTATE);
  const float4* __restrict__ Bv = reinterpret_cast<const float4*>(B + bg * NSTATE);
  const float4* __restrict__ Cv = reinterpret_cast<const float4*>(C + bg * NSTATE);
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    const int i = j * 32 + lane;
    float4 s = st[i];
    const float4 b = Bv[i], c = Cv[i];
    s.x = s.x * dA + dBx * b.x;
    s.y = s.y * dA + dBx * b.y;
    s.z = s.z * dA + dBx * b.z;
    s.w = s.w * dA + dBx * b.w;
    st[i] = s;
    acc += s.x * c.x + s.y * c.y + s.z * c.z + s.w * c.w;
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) y[bh * P + p] = acc + D[head] * xv;
}
