// cub::BlockScan (kport's own, from CUB's documentation): prefix scans across the block, one or
// ITEMS_PER_THREAD items per thread, in CUB's order of operations (float results match real CUB).
// - WARP_SCANS: a shuffle-up scan per warp; the warp totals go through shared memory, each warp
//   folding those before it in warp order (blocks that are not whole warps rake instead, as CUB).
// - RAKING (and RAKING_MEMOIZE, the same numbers): values into a shared grid; the first warp
//   reduces its segments sequentially, scans the segment totals across the warp and scans each
//   segment back into the grid.
// Exclusive scans without an initial value leave thread 0's output undefined: poisoned here.
// block_aggregate is given to every thread. A prefix callback is called by the first warp with
// the block aggregate; what lane 0 returns is the prefix of the whole block (thread 0's exclusive
// output). Like CUB, a scan does not end with a barrier: reusing temp_storage needs __syncthreads().
#pragma once
#pragma clang system_header
#include <cub/detail/kport_core.cuh>
#include <cub/detail/kport_sizes.cuh>

namespace cub {

enum BlockScanAlgorithm {
  BLOCK_SCAN_RAKING,
  BLOCK_SCAN_RAKING_MEMOIZE,
  BLOCK_SCAN_WARP_SCANS,
};

template <class T, int BLOCK_DIM_X, BlockScanAlgorithm ALGORITHM = BLOCK_SCAN_RAKING,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockScan {
  static constexpr int BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr int WARPS = (BLOCK_THREADS + 31) / 32;
  using S = __kp::block_scan_size<T, BLOCK_THREADS, ALGORITHM>;
  using R = __kp::raking_layout<T, BLOCK_THREADS>;
  // Like CUB, warp scans only for whole warps; other blocks rake.
  static constexpr bool WARP_SCANS = ALGORITHM == BLOCK_SCAN_WARP_SCANS && BLOCK_THREADS % 32 == 0;
  static constexpr bool ONE_WARP = !WARP_SCANS && R::RAKERS == BLOCK_THREADS;
  static_assert(!WARP_SCANS || (WARPS + 1) * sizeof(T) <= S::BYTES,
                "kport cub: BlockScan storage too small");
  static_assert(WARP_SCANS || ONE_WARP || (BLOCK_THREADS + 1) * sizeof(T) <= S::BYTES,
                "kport cub: BlockScan storage too small");

 public:
  struct TempStorage : __kp::raw_storage<S::BYTES, S::ALIGN> {};

 private:
  T* slots_;
  int tid_;
  __kp::site site_;
  struct no_callback {
    T operator()(const T& v) { return v; }
  };

  // One warp's scan of `lanes` lanes: inclusive and previous (exclusive) result of this lane, and
  // the last lane's inclusive result (poisoned when a lane it needs is missing).
  struct warp_result {
    T incl, prev, total;
  };
  template <class Op>
  __KP_INLINE warp_result warp_scan(const T& input, int lanes, Op& op) {
    T all[32];
    unsigned lane = __kp_cur->lane;
    uint32_t got = __kp::gather(input, __kp::lane_mask(0, (unsigned)lanes), site_, all);
    unsigned have = 0;
    while (have < (unsigned)lanes && ((got >> have) & 1u)) have++;
    __kp::tree_scan(all, (int)have, op);
    if (lane >= have) __kp::missing_lane("cub::BlockScan", site_.line, tid_ - lane + have);
    return {lane < have ? all[lane] : __kp::poison<T>(),
            lane == 0 || lane > have ? __kp::poison<T>() : all[lane - 1],
            have == (unsigned)lanes ? all[lanes - 1] : __kp::poison<T>()};
  }
  // What lane 0 of the calling lanes has.
  __KP_INLINE T from_lane0(const T& v, int lanes) {
    T all[32];
    uint32_t got = __kp::gather(v, __kp::lane_mask(0, (unsigned)lanes), site_, all);
    return (got & 1u) ? all[0] : __kp::poison<T>();
  }

  // The block-wide scan of one value per thread: inclusive (INCL) or exclusive, with an initial
  // value (init), a prefix callback (cb) or neither; *aggregate gets the block's total.
  template <bool INCL, class Op, class Cb>
  __KP_INLINE T scan(const T& input, Op& op, const T* init, Cb* cb, T* aggregate) {
    __kp::check_block("cub::BlockScan", site_, BLOCK_THREADS, tid_);
    if constexpr (WARP_SCANS) return scan_warps<INCL>(input, op, init, cb, aggregate);
    else return scan_raking<INCL>(input, op, init, cb, aggregate);
  }

  template <bool INCL, class Op, class Cb>
  __KP_INLINE T scan_warps(const T& input, Op& op, const T* init, Cb* cb, T* aggregate) {
    int w = tid_ / 32, lane = tid_ % 32;
    int lanes = BLOCK_THREADS - w * 32 < 32 ? BLOCK_THREADS - w * 32 : 32;
    warp_result r = warp_scan(input, lanes, op);
    if (lane == lanes - 1) slots_[w] = r.total;
    __kp::barrier(site_);
    T total = slots_[0], prefix = total;
    for (int j = 1; j < WARPS; j++) {
      if (j == w) prefix = total;
      total = op(total, slots_[j]);
    }
    T out;
    if constexpr (INCL) {
      out = w == 0 ? r.incl : op(prefix, r.incl);
    } else if (init) {
      T p = w == 0 ? *init : op(*init, prefix);
      out = lane == 0 ? p : op(p, r.prev);
    } else {
      out = w == 0 ? r.prev : lane == 0 ? prefix : op(prefix, r.prev);
    }
    if (cb) {
      if (w == 0) {
        T p = (*cb)(total);
        if (lane == 0) slots_[WARPS] = p;
      }
      __kp::barrier(site_);
      T p = slots_[WARPS];
      out = !INCL && tid_ == 0 ? p : op(p, out);
    }
    if (aggregate) *aggregate = total;
    return out;
  }

  template <bool INCL, class Op, class Cb>
  __KP_INLINE T scan_raking(const T& input, Op& op, const T* init, Cb* cb, T* aggregate) {
    if constexpr (ONE_WARP) {
      warp_result r = warp_scan(input, BLOCK_THREADS, op);
      T out = INCL ? r.incl : !init ? r.prev : tid_ == 0 ? *init : op(*init, r.prev);
      if (cb) {
        T p = from_lane0((*cb)(r.total), BLOCK_THREADS);
        out = !INCL && tid_ == 0 ? p : op(p, out);
      }
      if (aggregate) *aggregate = r.total;
      return out;
    } else {
      slots_[tid_] = input;
      __kp::barrier(site_);
      if (tid_ < R::RAKERS) {
        int start = tid_ * R::SEGMENT;
        int n = BLOCK_THREADS - start < R::SEGMENT ? BLOCK_THREADS - start : R::SEGMENT;
        T partial = slots_[start];
        for (int i = 1; i < n; i++) partial = op(partial, slots_[start + i]);
        warp_result r = warp_scan(partial, R::RAKERS, op);
        T pre = r.prev;
        bool apply = tid_ != 0;
        if (init) {
          pre = tid_ == 0 ? *init : op(*init, r.prev);
          apply = true;
        } else if (cb) {
          T p = from_lane0((*cb)(r.total), R::RAKERS);
          pre = tid_ == 0 ? p : op(p, r.prev);
          apply = true;
        }
        T acc = apply ? op(pre, slots_[start]) : slots_[start];
        slots_[start] = INCL ? acc : pre;
        for (int i = 1; i < n; i++) {
          T next = slots_[start + i];
          if constexpr (INCL) slots_[start + i] = acc = op(acc, next);
          else {
            slots_[start + i] = acc;
            acc = op(acc, next);
          }
        }
        if (tid_ == 0) slots_[BLOCK_THREADS] = r.total;
      }
      __kp::barrier(site_);
      if (aggregate) *aggregate = slots_[BLOCK_THREADS];
      return slots_[tid_];
    }
  }

  // ITEMS_PER_THREAD forms: the block scans the threads' totals, each thread then its items.
  template <bool INCL, int IPT, class Op, class Cb>
  __KP_INLINE void scan_items(const T (&input)[IPT], T (&output)[IPT], Op& op, const T* init, Cb* cb,
                  T* aggregate) {
    if (INCL && IPT == 1 && !init) {
      output[0] = scan<true>(input[0], op, init, cb, aggregate);
      return;
    }
    T prefix = scan<false>(__kp::thread_reduce(input, op), op, init, cb, aggregate);
    bool apply = init || cb || tid_ != 0;
    if constexpr (INCL) __kp::thread_scan_inclusive(input, output, op, prefix, apply);
    else __kp::thread_scan_exclusive(input, output, op, prefix, apply);
  }

 public:
  BlockScan(__KP_SITE)
      : slots_(reinterpret_cast<T*>(&__kp::private_storage<TempStorage>({__kp_line, __kp_col}))),
        tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}
  BlockScan(TempStorage& temp_storage, __KP_SITE)
      : slots_(reinterpret_cast<T*>(&temp_storage)),
        tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}

  // ---- One item per thread ----
  __KP_INLINE void ExclusiveSum(T input, T& output) {
    ExclusiveScan(input, output, T{}, ::cub::Sum());
  }
  __KP_INLINE void ExclusiveSum(T input, T& output, T& block_aggregate) {
    ExclusiveScan(input, output, T{}, ::cub::Sum(), block_aggregate);
  }
  template <class BlockPrefixCallbackOp>
  __KP_INLINE void ExclusiveSum(T input, T& output, BlockPrefixCallbackOp& block_prefix_callback_op) {
    ExclusiveScan(input, output, ::cub::Sum(), block_prefix_callback_op);
  }
  template <class ScanOp>
  __KP_INLINE void ExclusiveScan(T input, T& output, T initial_value, ScanOp scan_op) {
    output = scan<false>(input, scan_op, &initial_value, (no_callback*)nullptr, nullptr);
  }
  template <class ScanOp>
  __KP_INLINE void ExclusiveScan(T input, T& output, T initial_value, ScanOp scan_op, T& block_aggregate) {
    output = scan<false>(input, scan_op, &initial_value, (no_callback*)nullptr, &block_aggregate);
  }
  template <class ScanOp, class BlockPrefixCallbackOp>
  __KP_INLINE void ExclusiveScan(T input, T& output, ScanOp scan_op,
                     BlockPrefixCallbackOp& block_prefix_callback_op) {
    output = scan<false>(input, scan_op, nullptr, &block_prefix_callback_op, nullptr);
  }
  __KP_INLINE void InclusiveSum(T input, T& output) { InclusiveScan(input, output, ::cub::Sum()); }
  __KP_INLINE void InclusiveSum(T input, T& output, T& block_aggregate) {
    InclusiveScan(input, output, ::cub::Sum(), block_aggregate);
  }
  template <class BlockPrefixCallbackOp>
  __KP_INLINE void InclusiveSum(T input, T& output, BlockPrefixCallbackOp& block_prefix_callback_op) {
    InclusiveScan(input, output, ::cub::Sum(), block_prefix_callback_op);
  }
  template <class ScanOp>
  __KP_INLINE void InclusiveScan(T input, T& output, ScanOp scan_op) {
    output = scan<true>(input, scan_op, nullptr, (no_callback*)nullptr, nullptr);
  }
  template <class ScanOp>
  __KP_INLINE void InclusiveScan(T input, T& output, ScanOp scan_op, T& block_aggregate) {
    output = scan<true>(input, scan_op, nullptr, (no_callback*)nullptr, &block_aggregate);
  }
  template <class ScanOp, class BlockPrefixCallbackOp>
  __KP_INLINE void InclusiveScan(T input, T& output, ScanOp scan_op,
                     BlockPrefixCallbackOp& block_prefix_callback_op) {
    output = scan<true>(input, scan_op, nullptr, &block_prefix_callback_op, nullptr);
  }

  // ---- ITEMS_PER_THREAD items per thread (blocked arrangement) ----
  template <int IPT>
  __KP_INLINE void ExclusiveSum(T (&input)[IPT], T (&output)[IPT]) {
    ExclusiveScan(input, output, T{}, ::cub::Sum());
  }
  template <int IPT>
  __KP_INLINE void ExclusiveSum(T (&input)[IPT], T (&output)[IPT], T& block_aggregate) {
    ExclusiveScan(input, output, T{}, ::cub::Sum(), block_aggregate);
  }
  template <int IPT, class BlockPrefixCallbackOp>
  __KP_INLINE void ExclusiveSum(T (&input)[IPT], T (&output)[IPT],
                    BlockPrefixCallbackOp& block_prefix_callback_op) {
    ExclusiveScan(input, output, ::cub::Sum(), block_prefix_callback_op);
  }
  template <int IPT, class ScanOp>
  __KP_INLINE void ExclusiveScan(T (&input)[IPT], T (&output)[IPT], T initial_value, ScanOp scan_op) {
    scan_items<false>(input, output, scan_op, &initial_value, (no_callback*)nullptr, nullptr);
  }
  template <int IPT, class ScanOp>
  __KP_INLINE void ExclusiveScan(T (&input)[IPT], T (&output)[IPT], T initial_value, ScanOp scan_op,
                     T& block_aggregate) {
    scan_items<false>(input, output, scan_op, &initial_value, (no_callback*)nullptr,
                      &block_aggregate);
  }
  template <int IPT, class ScanOp, class BlockPrefixCallbackOp>
  __KP_INLINE void ExclusiveScan(T (&input)[IPT], T (&output)[IPT], ScanOp scan_op,
                     BlockPrefixCallbackOp& block_prefix_callback_op) {
    scan_items<false>(input, output, scan_op, nullptr, &block_prefix_callback_op, nullptr);
  }
  template <int IPT>
  __KP_INLINE void InclusiveSum(T (&input)[IPT], T (&output)[IPT]) {
    InclusiveScan(input, output, ::cub::Sum());
  }
  template <int IPT>
  __KP_INLINE void InclusiveSum(T (&input)[IPT], T (&output)[IPT], T& block_aggregate) {
    InclusiveScan(input, output, ::cub::Sum(), block_aggregate);
  }
  template <int IPT, class BlockPrefixCallbackOp>
  __KP_INLINE void InclusiveSum(T (&input)[IPT], T (&output)[IPT],
                    BlockPrefixCallbackOp& block_prefix_callback_op) {
    InclusiveScan(input, output, ::cub::Sum(), block_prefix_callback_op);
  }
  template <int IPT, class ScanOp>
  __KP_INLINE void InclusiveScan(T (&input)[IPT], T (&output)[IPT], ScanOp scan_op) {
    scan_items<true>(input, output, scan_op, nullptr, (no_callback*)nullptr, nullptr);
  }
  template <int IPT, class ScanOp>
  __KP_INLINE void InclusiveScan(T (&input)[IPT], T (&output)[IPT], ScanOp scan_op, T& block_aggregate) {
    scan_items<true>(input, output, scan_op, nullptr, (no_callback*)nullptr, &block_aggregate);
  }
  template <int IPT, class ScanOp>
  __KP_INLINE void InclusiveScan(T (&input)[IPT], T (&output)[IPT], T initial_value, ScanOp scan_op) {
    scan_items<true>(input, output, scan_op, &initial_value, (no_callback*)nullptr, nullptr);
  }
  template <int IPT, class ScanOp>
  __KP_INLINE void InclusiveScan(T (&input)[IPT], T (&output)[IPT], T initial_value, ScanOp scan_op,
                     T& block_aggregate) {
    scan_items<true>(input, output, scan_op, &initial_value, (no_callback*)nullptr,
                     &block_aggregate);
  }
  template <int IPT, class ScanOp, class BlockPrefixCallbackOp>
  __KP_INLINE void InclusiveScan(T (&input)[IPT], T (&output)[IPT], ScanOp scan_op,
                     BlockPrefixCallbackOp& block_prefix_callback_op) {
    scan_items<true>(input, output, scan_op, nullptr, &block_prefix_callback_op, nullptr);
  }
};

}  // namespace cub
