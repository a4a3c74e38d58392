// Mamba-1 selective scan forward (real A, input-dependent B and C, one group):
//   dt_t = softplus(delta[t] + delta_bias),  h_t = exp(dt_t A) * h_{t-1} + dt_t B_t u_t,
//   y_t = C_t . h_t + D u_t,  and the final state h_L.
// u, delta, out: [B, Dm, L]; A: [Dm, N]; B, C: [B, N, L]; last_state: [B, Dm, N].
// One block per (channel, batch). Time is cut into chunks of NTHREADS * NITEMS steps; inside a
// chunk thread j owns NITEMS consecutive steps. The recurrence h -> a h + b composes
// associatively, (a1, b1) then (a2, b2) = (a1 a2, a2 b1 + b2), so each state n is a block-wide
// scan: a thread folds its own steps, warps scan with shuffles, warp totals meet in shared
// memory, and the state carried across chunks (all N entries) lives in registers of every thread.
// The exponentials are exp2 with A pre-multiplied by log2(e).

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

template <int NTHREADS, int NITEMS, int NSTATE>
__global__ void __launch_bounds__(NTHREADS)
selective_scan_fwd(const float* __restrict__ u, const float* __restrict__ delta,
                   const float* __restrict__ A, const float* __restrict__ B,
                   const float* __restrict__ C, const float* __restrict__ D,
                   const float* __restrict__ delta_bias, float* __restrict__ out,
                   float* __restrict__ last_state, int L) {
  constexpr int CHUNK = NTHREADS * NITEMS, kWarps = NTHREADS / 32;
  __shared__ float s_u[CHUNK], s_dt[CHUNK], s_y[CHUNK];
  __shared__ float s_B[NSTATE][CHUNK], s_C[NSTATE][CHUNK];
  __shared__ float2 s_warp[NSTATE][kWarps];  // per-state warp totals (a, b)

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int dim = blockIdx.x, n_dim = gridDim.x, batch = blockIdx.y;
  const size_t row = ((size_t)batch * n_dim + dim) * L;
  u += row;
  delta += row;
  out += row;
  B += (size_t)batch * NSTATE * L;
  C += (size_t)batch * NSTATE * L;
  const float d_skip = D[dim], bias = delta_bias[dim];

  float A2[NSTATE], carry[NSTATE];
#pragma unroll
  for (int n = 0; n < NSTATE; ++n) {
    A2[n] = A[dim * NSTATE + n] * 1.4426950408889634f;
    carry[n] = 0.0f;
  }

  for (int t0 = 0; t0 < L; t0 += CHUNK) {
    __syncthreads();  // the previous chunk is done with shared memory
    // Coalesced loads of the chunk; padding steps get dt = 0, i.e. the identity (1, 0).
    for (int i = tid; i < CHUNK; i += NTHREADS) {
      const bool in = t0 + i < L;
      s_u[i] = in ? u[t0 + i] : 0.0f;
      s_dt[i] = in ? softplus(delta[t0 + i] + bias) : 0.0f;
#pragma unroll
      for (int n = 0; n < NSTATE; ++n) {
        s_B[n][i] = in ? B[(size_t)n * L + t0 + i] : 0.0f;
        s_C[n][i] = in ? C[(size_t)n * L + t0 + i] : 0.0f;
      }
    }
    __syncthreads();

    float uv[NITEMS], dtv[NITEMS], y[NITEMS];
#pragma unroll
    for (int i = 0; i < NITEMS; ++i) {
      uv[i] = s_u[tid * NITEMS + i];
      dtv[i] = s_dt[tid * NITEMS + i];
      y[i] = d_skip * uv[i];
    }

    // Phase 1: per state, fold this thread's steps and scan across the warp.
    float pre_a[NSTATE], pre_b[NSTATE];  // exclusive prefix within the warp
#pragma unroll
    for (int n = 0; n < NSTATE; ++n) {
      float ta = 1.0f, tb = 0.0f;
#pragma unroll
      for (int i = 0; i < NITEMS; ++i) {
        const float a = exp2f(dtv[i] * A2[n]);
        ta *= a;
        tb = a * tb + dtv[i] * uv[i] * s_B[n][tid * NITEMS + i];
      }
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const float pa = __shfl_up_sync(0xffffffffu, ta, off);
        const float pb = __shfl_up_sync(0xffffffffu, tb, off);
        if (lane >= off) {
          tb = ta * pb + tb;
          ta = ta * pa;
        }
      }
      if (lane == 31) s_warp[n][warp] = make_float2(ta, tb);
      pre_a[n] = __shfl_up_sync(0xffffffffu, ta, 1);
      pre_b[n] = __shfl_up_sync(0xffffffffu, tb, 1);
      if (lane == 0) {
        pre_a[n] = 1.0f;
        pre_b[n] = 0.0f;
      }
    }
    __syncthreads();

    // Phase 2: carry -> earlier warps -> earlier lanes gives the state entering this thread's
    // steps; walk them, accumulate y, and advance the carry by the whole chunk.
#pragma unroll
    for (int n = 0; n < NSTATE; ++n) {
      float h = carry[n];
      for (int w = 0; w < kWarps; ++w) {
        const float2 tw = s_warp[n][w];
        if (w < warp) h = tw.x * h + tw.y;
        carry[n] = tw.x * carry[n] + tw.y;
      }
      h = pre_a[n] * h + pre_b[n];
#pragma unroll
      for (int i = 0; i < NITEMS; ++i) {
        h = exp2f(dtv[i] * A2[n]) * h + dtv[i] * uv[i] * s_B[n][tid * NITEMS + i];
        y[i] += h * s_C[n][tid * NITEMS + i];
      }
    }

#pragma unroll
    for (int i = 0; i < NITEMS; ++i) s_y[tid * NITEMS + i] = y[i];
    __syncthreads();
    for (int i = tid; i < CHUNK && t0 + i < L; i += NTHREADS) out[t0 + i] = s_y[i];
  }

  if (tid < NSTATE) {
    // Every thread holds the same carry; thread n writes entry n (static register indexing).
#pragma unroll
    for (int n = 0; n < NSTATE; ++n)
      if (n == tid) last_state[((size_t)batch * n_dim + dim) * NSTATE + n] = carry[n];
  }
}
