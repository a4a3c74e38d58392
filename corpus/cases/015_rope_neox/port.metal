// One thread per rotated pair on a 2-D grid: x runs over the pairs of all q heads followed by
// all k heads, y over tokens. q and k are read from the inputs and written to the fresh
// outputs q_out/k_out; each thread writes both elements of its pair, so every output element
// is written exactly once.
const uint token = thread_position_in_grid.y;
const uint half_dim = uint(head_dim) / 2;
const uint q_pairs = uint(num_q_heads) * half_dim;
const uint p = thread_position_in_grid.x;
if (p < q_pairs + uint(num_kv_heads) * half_dim) {
  const bool is_q = p < q_pairs;
  const uint local = is_q ? p : p - q_pairs;
  const uint h = local / half_dim, j = local % half_dim;
  const uint heads = is_q ? uint(num_q_heads) : uint(num_kv_heads);
  const size_t base = (size_t(token) * heads + h) * uint(head_dim);
  const device float* cs = cos_sin + size_t(positions[token]) * uint(head_dim);
  const float c = cs[j], s = cs[half_dim + j];
  const device float* src = is_q ? q : k;
  device float* dst = is_q ? q_out : k_out;
  const float x1 = src[base + j], x2 = src[base + j + half_dim];
  dst[base + j] = x1 * c - x2 * s;
  dst[base + j + half_dim] = x2 * c + x1 * s;
}
