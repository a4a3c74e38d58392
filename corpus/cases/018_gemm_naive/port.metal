// One thread per element of C. The threadgroup is 32 x 8, so each SIMD-group covers 32
// consecutive columns of one row: the A element is the same for the whole SIMD-group (one
// broadcast load) and the B row segment is contiguous.
const int col = int(thread_position_in_grid.x);
const int row = int(thread_position_in_grid.y);
const int m = M, nc = N, kd = K;
if (row >= m || col >= nc) return;
const device float* a = A + size_t(row) * kd;
const device float* b = B + col;
float acc = 0.0f;
for (int k = 0; k < kd; ++k) acc = fma(a[k], b[size_t(k) * nc], acc);
C[size_t(row) * nc + col] = acc;
