// cub::BlockStore and the StoreDirect* functions (kport's own, from CUB's documentation): a
// blocked arrangement (BLOCK_STORE_STRIPED: a striped one) written to a linear tile. Guarded
// stores write only items below valid_items; the transposing algorithms share valid_items through
// their storage after the exchange, behind a __syncthreads(), as CUB does.
#pragma once
#pragma clang system_header
#include <cub/detail/kport_core.cuh>
#include <cub/block/block_exchange.cuh>

namespace cub {

enum BlockStoreAlgorithm {
  BLOCK_STORE_DIRECT,
  BLOCK_STORE_STRIPED,
  BLOCK_STORE_VECTORIZE,
  BLOCK_STORE_TRANSPOSE,
  BLOCK_STORE_WARP_TRANSPOSE,
  BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED,
};

namespace __kp {
template <int IPT, class T, class It, class Pos>
__KP_INLINE void store_items(It it, const T (&items)[IPT], Pos pos, bool guarded, int end) {
  for (int i = 0; i < IPT; i++) {
    int p = pos(i);
    if (!guarded || p < end) it[p] = items[i];
  }
}
}  // namespace __kp

template <class T, int IPT, class It>
__KP_INLINE void StoreDirectBlocked(int linear_tid, It block_itr, T (&items)[IPT]) {
  __kp::store_items(block_itr, items, [=](int i) { return linear_tid * IPT + i; }, false, 0);
}
template <class T, int IPT, class It>
__KP_INLINE void StoreDirectBlocked(int linear_tid, It block_itr, T (&items)[IPT],
                                    int valid_items) {
  __kp::store_items(block_itr, items, [=](int i) { return linear_tid * IPT + i; }, true,
                    valid_items);
}
template <class T, int IPT>
__KP_INLINE void StoreDirectBlockedVectorized(int linear_tid, T* block_ptr, T (&items)[IPT]) {
  StoreDirectBlocked(linear_tid, block_ptr, items);
}
template <int BLOCK_THREADS, class T, int IPT, class It>
__KP_INLINE void StoreDirectStriped(int linear_tid, It block_itr, T (&items)[IPT]) {
  __kp::store_items(block_itr, items, [=](int i) { return i * BLOCK_THREADS + linear_tid; },
                    false, 0);
}
template <int BLOCK_THREADS, class T, int IPT, class It>
__KP_INLINE void StoreDirectStriped(int linear_tid, It block_itr, T (&items)[IPT],
                                    int valid_items) {
  __kp::store_items(block_itr, items, [=](int i) { return i * BLOCK_THREADS + linear_tid; },
                    true, valid_items);
}
template <class T, int IPT, class It>
__KP_INLINE void StoreDirectWarpStriped(int linear_tid, It block_itr, T (&items)[IPT]) {
  int base = linear_tid / 32 * 32 * IPT, lane = linear_tid % 32;
  __kp::store_items(block_itr, items, [=](int i) { return base + i * 32 + lane; }, false, 0);
}
template <class T, int IPT, class It>
__KP_INLINE void StoreDirectWarpStriped(int linear_tid, It block_itr, T (&items)[IPT],
                                        int valid_items) {
  int base = linear_tid / 32 * 32 * IPT, lane = linear_tid % 32;
  __kp::store_items(block_itr, items, [=](int i) { return base + i * 32 + lane; }, true,
                    valid_items);
}

template <class T, int BLOCK_DIM_X, int ITEMS_PER_THREAD,
          BlockStoreAlgorithm ALGORITHM = BLOCK_STORE_DIRECT, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockStore {
  static constexpr int BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr int IPT = ITEMS_PER_THREAD;
  static constexpr bool TRANSPOSES = ALGORITHM == BLOCK_STORE_TRANSPOSE ||
                                     ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE ||
                                     ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED;
  static constexpr bool WARP = ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE ||
                               ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED;
  static_assert(!WARP || BLOCK_THREADS % 32 == 0,
                "cub::BlockStore: the warp-transpose algorithms need a block of whole warps "
                "(BLOCK_THREADS a multiple of 32)");
  using Exchange = BlockExchange<T, BLOCK_DIM_X, IPT,
                                 ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED, BLOCK_DIM_Y,
                                 BLOCK_DIM_Z>;
  // The exchange buffer, then the shared valid_items.
  struct transposing {
    typename Exchange::TempStorage exchange;
    int valid_items;
  };
  static constexpr size_t BYTES = TRANSPOSES ? __kp::round_up(sizeof(transposing), 16) : 1;
  static constexpr size_t ALIGN = TRANSPOSES ? 16 : 1;

 public:
  struct TempStorage : __kp::raw_storage<BYTES, ALIGN> {};

 private:
  TempStorage* storage_;
  int tid_;
  __kp::site site_;

  template <class It, class Items>
  __KP_INLINE void write(It it, Items& items, bool guarded, int end) {
    if constexpr (ALGORITHM == BLOCK_STORE_STRIPED || ALGORITHM == BLOCK_STORE_TRANSPOSE) {
      if (guarded) StoreDirectStriped<BLOCK_THREADS>(tid_, it, items, end);
      else StoreDirectStriped<BLOCK_THREADS>(tid_, it, items);
    } else if constexpr (WARP) {
      if (guarded) StoreDirectWarpStriped(tid_, it, items, end);
      else StoreDirectWarpStriped(tid_, it, items);
    } else {
      if (guarded) StoreDirectBlocked(tid_, it, items, end);
      else StoreDirectBlocked(tid_, it, items);
    }
  }
  template <class It>
  __KP_INLINE void store(It it, T (&items)[IPT], bool guarded, int end) {
    if constexpr (TRANSPOSES) {
      // In place, as in CUB: the caller's items come back rearranged.
      auto& ts = reinterpret_cast<transposing&>(*storage_);
      Exchange ex(ts.exchange, site_.line, site_.col);
      if constexpr (WARP) ex.BlockedToWarpStriped(items, items);
      else ex.BlockedToStriped(items, items);
      if (guarded) {
        if (tid_ == 0) ts.valid_items = end;
        __kp::barrier(site_);
        end = ts.valid_items;
      }
      write(it, items, guarded, end);
    } else {
      write(it, items, guarded, end);
    }
  }

 public:
  BlockStore(__KP_SITE)
      : storage_(&__kp::private_storage<TempStorage>({__kp_line, __kp_col})),
        tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}
  BlockStore(TempStorage& temp_storage, __KP_SITE)
      : storage_(&temp_storage), tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}

  template <class OutputIteratorT>
  __KP_INLINE void Store(OutputIteratorT block_itr, T (&items)[IPT]) {
    store(block_itr, items, false, 0);
  }
  template <class OutputIteratorT>
  __KP_INLINE void Store(OutputIteratorT block_itr, T (&items)[IPT], int valid_items) {
    store(block_itr, items, true, valid_items);
  }
};

}  // namespace cub
