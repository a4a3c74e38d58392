// A 2-D grid instead of a block-stride loop: x walks the row in float4 chunks (or floats when
// D % 4 != 0), y is the token, so every thread copies exactly one chunk and the grid needs no
// loop. The id is a uniform load per row; invalid ids give zero rows as in CUDA.
const uint i = thread_position_in_grid.x;
const uint t = thread_position_in_grid.y;
const int id = ids[t], dim = D;
const bool valid = id >= 0 && id < vocab;
const device float* src = table + size_t(valid ? id : 0) * dim;
device float* dst = out + size_t(t) * dim;
if ((dim & 3) == 0) {
  if (i < uint(dim / 4))
    ((device float4*)dst)[i] = valid ? ((const device float4*)src)[i] : float4(0.0f);
} else if (i < uint(dim)) {
  dst[i] = valid ? src[i] : 0.0f;
}
