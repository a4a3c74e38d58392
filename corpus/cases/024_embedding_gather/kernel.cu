// Embedding lookup out[t, :] = table[ids[t], :] (a row gather). One block per token; threads
// copy the row as float4 when D % 4 == 0 (every row 16-byte aligned), else one float at a time.
// Ids outside [0, vocab) produce a zero row instead of reading out of bounds.
extern "C" __global__ void embedding_gather(const float* __restrict__ table,
                                            const int* __restrict__ ids, float* __restrict__ out,
                                            int vocab, int D) {
  const int t = blockIdx.x;
  const int id = ids[t];
  const bool valid = id >= 0 && id < vocab;
  const float* __restrict__ src = table + (size_t)(valid ? id : 0) * D;
  float* __restrict__ dst = out + (size_t)t * D;
  if ((D & 3) == 0) {
    const float4* __restrict__ s4 = reinterpret_cast<const float4*>(src);
    float4* __restrict__ d4 = reinterpret_cast<float4*>(dst);
    for (int i = threadIdx.x; i < D / 4; i += blockDim.x)
      d4[i] = valid ? s4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  } else {
    for (int i = threadIdx.x; i < D; i += blockDim.x) dst[i] = valid ? src[i] : 0.0f;
  }
}
