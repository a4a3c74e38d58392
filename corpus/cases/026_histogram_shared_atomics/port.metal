// Same two-level scheme: a threadgroup histogram of atomic_uint (no initializer allowed, so it
// is zeroed with atomic_store_explicit before a barrier), relaxed atomic_fetch_add_explicit per
// byte, then one device atomic add per non-zero bin into `hist` (atomic_outputs, init_value 0).
// Bytes are read four at a time into a uchar4 (element by element: MLX passes an input under
// 8 elements as `constant`, where a cast to `const device uchar4*` would not compile).
constexpr int kBins = 256;
threadgroup atomic_uint local[kBins];
const uint tid = thread_index_in_threadgroup;
const uint tg_size = threads_per_threadgroup.x;
for (uint b = tid; b < uint(kBins); b += tg_size)
  atomic_store_explicit(&local[b], 0u, memory_order_relaxed);
threadgroup_barrier(mem_flags::mem_threadgroup);

const int len = n;
const uint stride = threads_per_grid.x;
const uint first = thread_position_in_grid.x;
for (uint i = first; i < uint(len / 4); i += stride) {
  const uchar4 v = uchar4(data[4 * i], data[4 * i + 1], data[4 * i + 2], data[4 * i + 3]);
  for (int c = 0; c < 4; ++c) atomic_fetch_add_explicit(&local[v[c]], 1u, memory_order_relaxed);
}
for (uint i = uint(len & ~3) + first; i < uint(len); i += stride)
  atomic_fetch_add_explicit(&local[data[i]], 1u, memory_order_relaxed);
threadgroup_barrier(mem_flags::mem_threadgroup);

for (uint b = tid; b < uint(kBins); b += tg_size) {
  const uint count = atomic_load_explicit(&local[b], memory_order_relaxed);
  if (count != 0u) atomic_fetch_add_explicit(&hist[b], count, memory_order_relaxed);
}
