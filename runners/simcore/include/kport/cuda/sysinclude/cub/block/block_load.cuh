// cub::BlockLoad and the LoadDirect* functions (kport's own, from CUB's documentation): a tile of
// BLOCK_THREADS * ITEMS_PER_THREAD items read into a blocked arrangement (thread t holds items
// t*IPT .. t*IPT + IPT-1), except BLOCK_LOAD_STRIPED, which leaves it striped (thread t holds items
// t, t + BLOCK_THREADS, ...). Guarded loads read only items below valid_items; the others get
// oob_default when one is given and otherwise keep what the array held (exchanged along with the
// loaded items by the transposing algorithms, as in CUB).
#pragma once
#pragma clang system_header
#include <cub/detail/kport_core.cuh>
#include <cub/block/block_exchange.cuh>

namespace cub {

enum BlockLoadAlgorithm {
  BLOCK_LOAD_DIRECT,
  BLOCK_LOAD_STRIPED,
  BLOCK_LOAD_VECTORIZE,
  BLOCK_LOAD_TRANSPOSE,
  BLOCK_LOAD_WARP_TRANSPOSE,
  BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED,
};

namespace __kp {
// Reads item i from it[pos(i)] where pos(i) < end (all when end < 0 is not asked for).
template <int IPT, class T, class It, class Pos>
__KP_INLINE void load_items(It it, T (&items)[IPT], Pos pos, bool guarded, int end) {
  for (int i = 0; i < IPT; i++) {
    int p = pos(i);
    if (!guarded || p < end) items[i] = it[p];
  }
}
}  // namespace __kp

template <class T, int IPT, class It>
__KP_INLINE void LoadDirectBlocked(int linear_tid, It block_itr, T (&items)[IPT]) {
  __kp::load_items(block_itr, items, [=](int i) { return linear_tid * IPT + i; }, false, 0);
}
template <class T, int IPT, class It>
__KP_INLINE void LoadDirectBlocked(int linear_tid, It block_itr, T (&items)[IPT],
                                   int valid_items) {
  __kp::load_items(block_itr, items, [=](int i) { return linear_tid * IPT + i; }, true,
                   valid_items);
}
template <class T, class D, int IPT, class It>
__KP_INLINE void LoadDirectBlocked(int linear_tid, It block_itr, T (&items)[IPT],
                                   int valid_items, D oob_default) {
  for (int i = 0; i < IPT; i++) items[i] = oob_default;
  LoadDirectBlocked(linear_tid, block_itr, items, valid_items);
}
// Vectorized loads read what LoadDirectBlocked reads.
template <class T, int IPT>
__KP_INLINE void LoadDirectBlockedVectorized(int linear_tid, T* block_ptr, T (&items)[IPT]) {
  LoadDirectBlocked(linear_tid, block_ptr, items);
}
template <class T, int IPT>
__KP_INLINE void LoadDirectBlockedVectorized(int linear_tid, const T* block_ptr,
                                             T (&items)[IPT]) {
  LoadDirectBlocked(linear_tid, block_ptr, items);
}

template <int BLOCK_THREADS, class T, int IPT, class It>
__KP_INLINE void LoadDirectStriped(int linear_tid, It block_itr, T (&items)[IPT]) {
  __kp::load_items(block_itr, items, [=](int i) { return i * BLOCK_THREADS + linear_tid; },
                   false, 0);
}
template <int BLOCK_THREADS, class T, int IPT, class It>
__KP_INLINE void LoadDirectStriped(int linear_tid, It block_itr, T (&items)[IPT],
                                   int valid_items) {
  __kp::load_items(block_itr, items, [=](int i) { return i * BLOCK_THREADS + linear_tid; },
                   true, valid_items);
}
template <int BLOCK_THREADS, class T, class D, int IPT, class It>
__KP_INLINE void LoadDirectStriped(int linear_tid, It block_itr, T (&items)[IPT],
                                   int valid_items, D oob_default) {
  for (int i = 0; i < IPT; i++) items[i] = oob_default;
  LoadDirectStriped<BLOCK_THREADS>(linear_tid, block_itr, items, valid_items);
}

// Warp w reads the w-th run of 32*IPT items; lane l its items l, l + 32, ...
template <class T, int IPT, class It>
__KP_INLINE void LoadDirectWarpStriped(int linear_tid, It block_itr, T (&items)[IPT]) {
  int base = linear_tid / 32 * 32 * IPT, lane = linear_tid % 32;
  __kp::load_items(block_itr, items, [=](int i) { return base + i * 32 + lane; }, false, 0);
}
template <class T, int IPT, class It>
__KP_INLINE void LoadDirectWarpStriped(int linear_tid, It block_itr, T (&items)[IPT],
                                       int valid_items) {
  int base = linear_tid / 32 * 32 * IPT, lane = linear_tid % 32;
  __kp::load_items(block_itr, items, [=](int i) { return base + i * 32 + lane; }, true,
                   valid_items);
}
template <class T, class D, int IPT, class It>
__KP_INLINE void LoadDirectWarpStriped(int linear_tid, It block_itr, T (&items)[IPT],
                                       int valid_items, D oob_default) {
  for (int i = 0; i < IPT; i++) items[i] = oob_default;
  LoadDirectWarpStriped(linear_tid, block_itr, items, valid_items);
}

template <class T, int BLOCK_DIM_X, int ITEMS_PER_THREAD,
          BlockLoadAlgorithm ALGORITHM = BLOCK_LOAD_DIRECT, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockLoad {
  static constexpr int BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr int IPT = ITEMS_PER_THREAD;
  static constexpr bool TRANSPOSES = ALGORITHM == BLOCK_LOAD_TRANSPOSE ||
                                     ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE ||
                                     ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED;
  static constexpr bool WARP = ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE ||
                               ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED;
  static_assert(!WARP || BLOCK_THREADS % 32 == 0,
                "cub::BlockLoad: the warp-transpose algorithms need a block of whole warps "
                "(BLOCK_THREADS a multiple of 32)");
  using Exchange = BlockExchange<T, BLOCK_DIM_X, IPT,
                                 ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED, BLOCK_DIM_Y,
                                 BLOCK_DIM_Z>;
  static constexpr size_t BYTES = TRANSPOSES ? sizeof(typename Exchange::TempStorage) : 1;
  static constexpr size_t ALIGN = TRANSPOSES ? alignof(typename Exchange::TempStorage) : 1;

 public:
  struct TempStorage : __kp::raw_storage<BYTES, ALIGN> {};

 private:
  TempStorage* storage_;
  int tid_;
  __kp::site site_;

  template <class Items>
  __KP_INLINE void arrange(Items& items) {
    if constexpr (TRANSPOSES) {
      auto& ts = reinterpret_cast<typename Exchange::TempStorage&>(*storage_);
      Exchange ex(ts, site_.line, site_.col);
      if constexpr (WARP) ex.WarpStripedToBlocked(items, items);
      else ex.StripedToBlocked(items, items);
    }
  }
  template <class It, class Items>
  __KP_INLINE void read(It it, Items& items, bool guarded, int end) {
    if constexpr (ALGORITHM == BLOCK_LOAD_STRIPED || ALGORITHM == BLOCK_LOAD_TRANSPOSE) {
      if (guarded) LoadDirectStriped<BLOCK_THREADS>(tid_, it, items, end);
      else LoadDirectStriped<BLOCK_THREADS>(tid_, it, items);
    } else if constexpr (WARP) {
      if (guarded) LoadDirectWarpStriped(tid_, it, items, end);
      else LoadDirectWarpStriped(tid_, it, items);
    } else {
      if (guarded) LoadDirectBlocked(tid_, it, items, end);
      else LoadDirectBlocked(tid_, it, items);
    }
  }

 public:
  BlockLoad(__KP_SITE)
      : storage_(&__kp::private_storage<TempStorage>({__kp_line, __kp_col})),
        tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}
  BlockLoad(TempStorage& temp_storage, __KP_SITE)
      : storage_(&temp_storage), tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}

  template <class InputIteratorT>
  __KP_INLINE void Load(InputIteratorT block_itr, T (&items)[IPT]) {
    read(block_itr, items, false, 0);
    arrange(items);
  }
  template <class InputIteratorT>
  __KP_INLINE void Load(InputIteratorT block_itr, T (&items)[IPT], int valid_items) {
    read(block_itr, items, true, valid_items);
    arrange(items);
  }
  template <class InputIteratorT, class DefaultT>
  __KP_INLINE void Load(InputIteratorT block_itr, T (&items)[IPT], int valid_items, DefaultT oob_default) {
    for (int i = 0; i < IPT; i++) items[i] = oob_default;
    read(block_itr, items, true, valid_items);
    arrange(items);
  }
};

}  // namespace cub
