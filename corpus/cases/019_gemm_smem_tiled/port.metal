// TILE x TILE threadgroup per TILE x TILE tile of C, staged through threadgroup memory.
// Rows of the tiles are padded by 4 floats (16 bytes), the padding MLX's GEMMs use, which keeps
// rows of As 16-byte aligned: a thread reads its row of As as float4 (a broadcast within the
// SIMD-group) and its column of Bs.
// Every thread reaches both barriers: out-of-range threads load zeros and skip only the store.
constexpr int kPad = 4;
threadgroup __attribute__((aligned(16))) float As[TILE][TILE + kPad];
threadgroup float Bs[TILE][TILE + kPad];
const int tx = int(thread_position_in_threadgroup.x), ty = int(thread_position_in_threadgroup.y);
const int row = int(threadgroup_position_in_grid.y) * TILE + ty;
const int col = int(threadgroup_position_in_grid.x) * TILE + tx;
const int m = M, nc = N, kd = K;

float acc = 0.0f;
for (int k0 = 0; k0 < kd; k0 += TILE) {
  As[ty][tx] = (row < m && k0 + tx < kd) ? A[size_t(row) * kd + k0 + tx] : 0.0f;
  Bs[ty][tx] = (k0 + ty < kd && col < nc) ? B[size_t(k0 + ty) * nc + col] : 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int k = 0; k < TILE; k += 4) {
    const float4 a = *(const threadgroup float4*)&As[ty][k];
    acc = fma(a.x, Bs[k][tx], acc);
    acc = fma(a.y, Bs[k + 1][tx], acc);
    acc = fma(a.z, Bs[k + 2][tx], acc);
    acc = fma(a.w, Bs[k + 3][tx], acc);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (row < m && col < nc) C[size_t(row) * nc + col] = acc;
