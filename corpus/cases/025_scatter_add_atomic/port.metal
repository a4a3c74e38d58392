// 2-D grid (column, source row): no division to split a flat index. The output is declared
// with atomic_outputs and zero-filled by init_value; each add is a relaxed
// atomic_fetch_add_explicit on device atomic<float> (MSL 3.0, Apple7+; device memory only).
const uint c = thread_position_in_grid.x;
const uint i = thread_position_in_grid.y;
if (c >= uint(D)) return;
const int row = idx[i];
atomic_fetch_add_explicit(&out[size_t(row) * D + c], src[size_t(i) * D + c],
                          memory_order_relaxed);
