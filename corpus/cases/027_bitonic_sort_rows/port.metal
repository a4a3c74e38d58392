// One thread per padded element (NPAD, a template argument, is the power of two >= n). A
// thread keeps its (key, index) in registers: exchanges with a partner less than 32 away stay
// inside the SIMD-group and use simd_shuffle_xor with no barrier; only wider strides go through
// threadgroup memory, ping-ponging between two buffers so that one barrier per step suffices.
threadgroup float sk[2][NPAD];
threadgroup int sv[2][NPAD];
const int i = int(thread_index_in_threadgroup);
const int len = n;
const size_t base = size_t(threadgroup_position_in_grid.x) * len;
float key = i < len ? keys[base + i] : numeric_limits<float>::infinity();
int val = i;

int buf = 0;
for (int k = 2; k <= NPAD; k <<= 1) {
  for (int j = k >> 1; j > 0; j >>= 1) {
    float pk;
    int pv;
    if (j >= 32) {
      sk[buf][i] = key;
      sv[buf][i] = val;
      threadgroup_barrier(mem_flags::mem_threadgroup);
      pk = sk[buf][i ^ j];
      pv = sv[buf][i ^ j];
      buf ^= 1;
    } else {
      pk = simd_shuffle_xor(key, ushort(j));
      pv = simd_shuffle_xor(val, ushort(j));
    }
    // The lower element of an ascending pair keeps the smaller (key, index), and so on.
    const bool partner_less = pk < key || (pk == key && pv < val);
    const bool keep_min = ((i & j) == 0) == ((i & k) == 0);
    if (partner_less == keep_min) {
      key = pk;
      val = pv;
    }
  }
}
if (i < len) {
  sorted[base + i] = key;
  order[base + i] = val;
}
