// Rotary position embedding, NeoX / half-split layout (element j pairs with j + head_dim/2, not
// with j^1 as in the interleaved GPT-J layout), applied in place to q [tokens, Hq, D] and
// k [tokens, Hkv, D] (GQA: Hkv <= Hq). cos_sin [max_pos, D] holds cos in its first D/2
// columns and sin in the rest. One block per token; threads stride over the (head, pair)s.
__device__ __forceinline__ void rotate_pair(float* __restrict__ head, int j, int half, float c,
                                            float s) {
  const float x1 = head[j];
  const float x2 = head[j + half];
  head[j] = x1 * c - x2 * s;
  head[j + half] = x2 * c + x1 * s;
}

extern "C" __global__ void rope_neox(const int* __restrict__ positions, float* __restrict__ q,
                                     float* __restrict__ k, const float* __restrict__ cos_sin,
                                     int head_dim, int num_q_heads, int num_kv_heads) {
  const int token = blockIdx.x;
  const int half = head_dim / 2;
  const float* cs = cos_sin + static_cast<size_t>(positions[token]) * head_dim;
  float* qt = q + static_cast<size_t>(token) * num_q_heads * head_dim;
  float* kt = k + static_cast<size_t>(token) * num_kv_heads * head_dim;

  for (int i = threadIdx.x; i < num_q_heads * half; i += blockDim.x) {
    const int h = i / half, j = i % half;
    rotate_pair(qt + h * head_dim, j, half, __ldg(&cs[j]), __ldg(&cs[half + j]));
  }
  for (int i = threadIdx.x; i < num_kv_heads * half; i += blockDim.x) {
    const int h = i / half, j = i % half;
    rotate_pair(kt + h * head_dim, j, half, __ldg(&cs[j]), __ldg(&cs[half + j]));
  }
}
