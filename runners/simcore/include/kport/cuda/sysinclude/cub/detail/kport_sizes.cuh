// The sizes of CUB's TempStorage types, which host code uses to size dynamic shared memory
// (sizeof(typename BlockLoadT::TempStorage)). The formulas reproduce the 1,500 sizes and
// alignments real CUB 3.0 gave on an NVIDIA H200 (docs/fidelity.md, "CUB collectives");
// the layouts behind them are kport's reading of those numbers, not CUB's code.
#pragma once
#pragma clang system_header
#include <stddef.h>

namespace cub {
namespace __kp {

__KP_INLINE constexpr size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
__KP_INLINE constexpr bool pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }
__KP_INLINE constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__KP_INLINE constexpr int next_pow2(int n) { return n <= 1 ? 1 : 2 * next_pow2((n + 1) / 2); }
__KP_INLINE constexpr size_t max_of(size_t a, size_t b) { return a > b ? a : b; }

// Fields laid out one after another, each at its own alignment.
struct fields {
  size_t size = 0, align = 1;
  constexpr fields add(size_t n, size_t a) const {
    return fields{round_up(size, a) + n, align > a ? align : a};
  }
  constexpr size_t bytes() const { return size ? round_up(size, align) : 1; }
};

// Warp collectives: one byte for power-of-two logical warps (shuffles), else L + P/2 elements of
// shared memory (P: L rounded up to a power of two), plus as many flag bytes for reductions.
template <class T, int L>
struct warp_reduce_size {
  static constexpr size_t ELEMS = L + next_pow2(L) / 2;
  static constexpr size_t BYTES = pow2(L) ? 1 : round_up(ELEMS * sizeof(T) + ELEMS, alignof(T));
  static constexpr size_t ALIGN = pow2(L) ? 1 : alignof(T);
};
template <class T, int L>
struct warp_scan_size {
  static constexpr size_t BYTES = pow2(L) ? 1 : (L + next_pow2(L) / 2) * sizeof(T);
  static constexpr size_t ALIGN = pow2(L) ? 1 : alignof(T);
};

// The raking grid of N values: SEGMENT items per raking thread (at most 32 of them), padded by
// one when the segment is even and over 2; stored 16-byte aligned and rounded.
template <class T, int N>
struct raking_layout {
  static constexpr int MAX_RAKERS = N < 32 ? N : 32;
  static constexpr int SEGMENT = ceil_div(N, MAX_RAKERS);
  static constexpr int RAKERS = ceil_div(N, SEGMENT);
  static constexpr bool PAD = SEGMENT % 2 == 0 && SEGMENT > 2;
  static constexpr int GRID = RAKERS * (SEGMENT + (PAD ? 1 : 0));
  static constexpr size_t BYTES = round_up(GRID * sizeof(T), 16);
};

// BlockReduce; algorithm 0 raking-commutative-only, 1 raking, 2 warp reductions (CUB's order).
template <class T, int BLOCK_THREADS, int ALGORITHM>
struct block_reduce_size {
  using R = raking_layout<T, BLOCK_THREADS>;
  static constexpr int WARPS = ceil_div(BLOCK_THREADS, 32);
  using W = warp_reduce_size<T, (BLOCK_THREADS < 32 ? BLOCK_THREADS : 32)>;
  // The raking grid shares its storage with the raking warp's reduction.
  static constexpr size_t RAKING =
      round_up(max_of(R::BYTES, warp_reduce_size<T, R::RAKERS>::BYTES), 16);
  // The first warp's own reduction, then the grid of the other threads' values.
  static constexpr int SHARING = BLOCK_THREADS - 32 > 1 ? BLOCK_THREADS - 32 : 1;
  static constexpr size_t COMMUTATIVE =
      max_of(16 + raking_layout<T, SHARING>::BYTES, RAKING);
  static constexpr fields WARP_REDUCTIONS = fields{}.add(WARPS * W::BYTES, W::ALIGN)
                                                .add(WARPS * sizeof(T), alignof(T))
                                                .add(sizeof(T), alignof(T));
  static constexpr size_t BYTES = ALGORITHM == 0 ? COMMUTATIVE : ALGORITHM == 1 ? RAKING
                                                                : WARP_REDUCTIONS.bytes();
  static constexpr size_t ALIGN = ALGORITHM == 2 ? WARP_REDUCTIONS.align : 16;
};

// BlockScan; algorithm 0 raking, 1 raking with memoization, 2 warp scans (CUB's order). Warp
// scans need whole warps: other blocks rake.
template <class T, int BLOCK_THREADS, int ALGORITHM>
struct block_scan_size {
  static constexpr int WARPS = ceil_div(BLOCK_THREADS, 32);
  static constexpr bool WARP_SCANS = ALGORITHM == 2 && BLOCK_THREADS % 32 == 0;
  using R = raking_layout<T, BLOCK_THREADS>;
  using WR = warp_scan_size<T, R::RAKERS>;
  static constexpr fields RAKING = fields{}.add(WR::BYTES, WR::ALIGN).add(R::BYTES, 16)
                                       .add(sizeof(T), alignof(T));
  // Warp totals, a byte per warp, the block prefix; 32-byte rounded.
  static constexpr size_t WARP = round_up(fields{}.add(WARPS * sizeof(T), alignof(T))
                                              .add(WARPS, 1).add(sizeof(T), alignof(T)).size,
                                          32);
  static constexpr size_t BYTES = WARP_SCANS ? WARP : round_up(RAKING.size, 16);
  static constexpr size_t ALIGN = 16;
};

}  // namespace __kp
}  // namespace cub
