// kport_wmma: CUDA's nvcuda::wmma in MSL (kport's own, written from wmma's documented semantics).
// The translator maps `wmma::X` and `nvcuda::wmma::X` onto `kport_wmma::X` (agent/translate/
// wmma.py). A fragment is the 8x8 simdgroup_matrix tiles covering it (Apple GPUs have only 8x8:
// apple-gpu-facts.md F8, Apple7+ hardware); a 16x16 fragment is 2 x 2 tiles, and one m16n16k16
// mma_sync is 2 x 2 outputs x 2 k-steps = 8 simdgroup_multiply_accumulate. Tile (i, j) holds rows
// 8i.. and columns 8j.. of the fragment's matrix: matrix_a is M x K, matrix_b K x N, the
// accumulator M x N. Loads and stores offset the pointer to each tile and keep the origin 0 (the
// ulong2 origin's order with transpose is unconfirmed: cuda-to-metal.md section 10); col_major
// loads the tile transposed. Element-to-lane layouts differ from CUDA's and are unspecified on
// both sides: this library has no `x[]` / `num_elements`. Every call is a SIMD-group collective
// (all 32 lanes, uniform control flow), as wmma's are warp collectives.
// Conservative MSL 3.1: templates, enums, explicit address spaces; pointers of any address
// space (device or threadgroup: simdgroup_load/store take both) arrive as a template parameter.
// unconfirmed: whether Apple's simdgroup_multiply_accumulate takes const operands; the tiles are
// copied into locals first, as MLX's steel MMA does.
namespace kport_wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

// A fragment's size in 8x8 tiles (ROWS x COLS)
template <typename Use, int M, int N, int K>
struct tiles;
template <int M, int N, int K>
struct tiles<matrix_a, M, N, K> {
  enum { ROWS = M / 8, COLS = K / 8 };
};
template <int M, int N, int K>
struct tiles<matrix_b, M, N, K> {
  enum { ROWS = K / 8, COLS = N / 8 };
};
template <int M, int N, int K>
struct tiles<accumulator, M, N, K> {
  enum { ROWS = M / 8, COLS = N / 8 };
};

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert((M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) ||
                    (M == 8 && N == 32 && K == 16),
                "kport_wmma: only the m16n16k16, m32n8k16 and m8n32k16 shapes");
  enum { ROWS = tiles<Use, M, N, K>::ROWS, COLS = tiles<Use, M, N, K>::COLS };
  simdgroup_matrix<T, 8, 8> tile[ROWS][COLS];
};

template <typename Use, int M, int N, int K, typename T, typename L, typename V>
inline void fill_fragment(thread fragment<Use, M, N, K, T, L>& f, V v) {
  for (int i = 0; i < fragment<Use, M, N, K, T, L>::ROWS; ++i)
    for (int j = 0; j < fragment<Use, M, N, K, T, L>::COLS; ++j)
      f.tile[i][j] = make_filled_simdgroup_matrix<T, 8, 8>(T(v));
}

// Tile (i, j) of a fragment from p with ldm elements per stored row: stored as the fragment's
// rows (row_major), or as its columns (col_major: the tile starts at column-block i, row-block
// j of the storage, loaded transposed).
template <typename F, typename P>
inline void load_tiles(thread F& f, P p, uint ldm, bool col) {
  for (int i = 0; i < F::ROWS; ++i)
    for (int j = 0; j < F::COLS; ++j) {
      if (col)
        simdgroup_load(f.tile[i][j], p + ulong(8 * j) * ldm + 8 * i, ulong(ldm), ulong2(0, 0),
                       true);
      else
        simdgroup_load(f.tile[i][j], p + ulong(8 * i) * ldm + 8 * j, ulong(ldm));
    }
}

template <typename Use, int M, int N, int K, typename T, typename P>
inline void load_matrix_sync(thread fragment<Use, M, N, K, T, row_major>& f, P p, uint ldm) {
  load_tiles(f, p, ldm, false);
}
template <typename Use, int M, int N, int K, typename T, typename P>
inline void load_matrix_sync(thread fragment<Use, M, N, K, T, col_major>& f, P p, uint ldm) {
  load_tiles(f, p, ldm, true);
}
template <int M, int N, int K, typename T, typename P>
inline void load_matrix_sync(thread fragment<accumulator, M, N, K, T>& f, P p, uint ldm,
                             layout_t layout) {
  load_tiles(f, p, ldm, layout == mem_col_major);
}

template <int M, int N, int K, typename T, typename P>
inline void store_matrix_sync(P p, thread const fragment<accumulator, M, N, K, T>& f, uint ldm,
                              layout_t layout) {
  for (int i = 0; i < M / 8; ++i)
    for (int j = 0; j < N / 8; ++j) {
      simdgroup_matrix<T, 8, 8> t = f.tile[i][j];
      if (layout == mem_col_major)
        simdgroup_store(t, p + ulong(8 * j) * ldm + 8 * i, ulong(ldm), ulong2(0, 0), true);
      else
        simdgroup_store(t, p + ulong(8 * i) * ldm + 8 * j, ulong(ldm));
    }
}

// d = a * b + c, each 8x8 output tile summed over the K / 8 k-steps after c (d may be c).
// unconfirmed: Apple's accumulation order and precision inside one 8x8 multiply.
template <int M, int N, int K, typename TD, typename TA, typename LA, typename TB, typename LB>
inline void mma_sync(thread fragment<accumulator, M, N, K, TD>& d,
                     thread const fragment<matrix_a, M, N, K, TA, LA>& a,
                     thread const fragment<matrix_b, M, N, K, TB, LB>& b,
                     thread const fragment<accumulator, M, N, K, TD>& c) {
  for (int i = 0; i < M / 8; ++i)
    for (int j = 0; j < N / 8; ++j) {
      simdgroup_matrix<TD, 8, 8> acc = c.tile[i][j];
      for (int k = 0; k < K / 8; ++k) {
        simdgroup_matrix<TA, 8, 8> x = a.tile[i][k];
        simdgroup_matrix<TB, 8, 8> y = b.tile[k][j];
        simdgroup_multiply_accumulate(acc, x, y, acc);
      }
      d.tile[i][j] = acc;
    }
}

}  // namespace kport_wmma
