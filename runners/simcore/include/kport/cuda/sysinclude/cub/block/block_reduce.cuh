// cub::BlockReduce (kport's own, from CUB's documentation): a reduction across the block whose
// result is defined in thread 0 only; every other thread gets a poison value. Each algorithm
// combines in CUB's order, so float results match real CUB bit for bit (docs/fidelity.md):
// - WARP_REDUCTIONS: a shuffle tree per warp, then thread 0 folds the warp totals in warp order;
// - RAKING: values into a shared grid, the first warp reduces segments sequentially, then a tree;
// - RAKING_COMMUTATIVE_ONLY: the first warp folds the other warps' values into its own (RAKING
//   when the block is not whole warps over 32 threads, or for a partial tile).
// num_valid: only threads below it hold values (the block may also be launched that small).
#pragma once
#pragma clang system_header
#include <cub/detail/kport_core.cuh>
#include <cub/detail/kport_sizes.cuh>

namespace cub {

enum BlockReduceAlgorithm {
  BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY,
  BLOCK_REDUCE_RAKING,
  BLOCK_REDUCE_WARP_REDUCTIONS,
};

template <class T, int BLOCK_DIM_X, BlockReduceAlgorithm ALGORITHM = BLOCK_REDUCE_WARP_REDUCTIONS,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockReduce {
  static constexpr int BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr int WARPS = (BLOCK_THREADS + 31) / 32;
  using S = __kp::block_reduce_size<T, BLOCK_THREADS, ALGORITHM>;
  using R = __kp::raking_layout<T, BLOCK_THREADS>;
  static constexpr bool COMMUTATIVE_FALLBACK = BLOCK_THREADS % 32 != 0 || BLOCK_THREADS <= 32;

 public:
  struct TempStorage : __kp::raw_storage<S::BYTES, S::ALIGN> {};

 private:
  T* slots_;
  int tid_;
  __kp::site site_;
  static constexpr const char* WHAT = "cub::BlockReduce";

  // The tree of lanes [0, valid) of this warp (which has `lanes` lanes in the block), at lane 0.
  template <class Op>
  __KP_INLINE T warp_tree(const T& input, int lanes, int width, int valid, Op& op) {
    T all[32];
    uint32_t got = __kp::gather(input, __kp::lane_mask(0, (unsigned)lanes), site_, all);
    if (valid < 1) return input;
    __kp::check_lanes(all, (unsigned)valid, got, 0, WHAT, site_, (unsigned)(tid_ - tid_ % 32));
    return __kp::tree_reduce(all, width, valid, op);
  }

  template <class Op>
  __KP_INLINE T warp_reductions(const T& input, Op& op, int num_valid, bool full) {
    int w = tid_ / 32, lanes = BLOCK_THREADS - w * 32 < 32 ? BLOCK_THREADS - w * 32 : 32;
    int valid = full ? lanes : num_valid - w * 32 < lanes ? num_valid - w * 32 : lanes;
    T agg = warp_tree(input, lanes, 32, valid, op);
    if (tid_ % 32 == 0 && w > 0 && valid > 0) slots_[w] = agg;
    __kp::barrier(site_);
    if (tid_ != 0) return __kp::poison<T>();
    for (int j = 1; j < WARPS && (full || j * 32 < num_valid); j++) agg = op(agg, slots_[j]);
    return agg;
  }

  template <class Op>
  __KP_INLINE T raking(const T& input, Op& op, int num_valid, bool full) {
    int limit = full ? BLOCK_THREADS : num_valid;
    if constexpr (R::RAKERS == BLOCK_THREADS) {  // one warp: a tree over the block
      T r = warp_tree(input, BLOCK_THREADS, BLOCK_THREADS, limit, op);
      return tid_ == 0 ? r : __kp::poison<T>();
    } else {
      slots_[tid_] = input;
      __kp::barrier(site_);
      if (tid_ >= R::RAKERS) return __kp::poison<T>();
      int start = tid_ * R::SEGMENT;
      T partial = start < limit ? slots_[start] : input;
      for (int i = 1; i < R::SEGMENT; i++)
        if (start + i < limit) partial = op(partial, slots_[start + i]);
      int rakers = full ? R::RAKERS : (num_valid + R::SEGMENT - 1) / R::SEGMENT;
      T r = warp_tree(partial, R::RAKERS, R::RAKERS, rakers, op);
      return tid_ == 0 ? r : __kp::poison<T>();
    }
  }

  template <class Op>
  __KP_INLINE T commutative(const T& input, Op& op) {
    constexpr int SEGMENT = (BLOCK_THREADS - 32) / 32;
    if (tid_ >= 32) slots_[tid_ - 32] = input;
    __kp::barrier(site_);
    if (tid_ >= 32) return __kp::poison<T>();
    T run[SEGMENT + 1];
    run[0] = input;
    for (int i = 0; i < SEGMENT; i++) run[i + 1] = slots_[tid_ * SEGMENT + i];
    T r = warp_tree(__kp::reduce_run(run, SEGMENT + 1, op), 32, 32, 32, op);
    return tid_ == 0 ? r : __kp::poison<T>();
  }

  template <class Op>
  __KP_INLINE T reduce(const T& input, Op& op, int num_valid) {
    bool full = num_valid >= BLOCK_THREADS;
    if (full) __kp::check_block(WHAT, site_, BLOCK_THREADS, tid_);
    if constexpr (ALGORITHM == BLOCK_REDUCE_WARP_REDUCTIONS)
      return warp_reductions(input, op, num_valid, full);
    else if constexpr (ALGORITHM == BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY && !COMMUTATIVE_FALLBACK)
      return full ? commutative(input, op) : raking(input, op, num_valid, false);
    else
      return raking(input, op, num_valid, full);
  }

  static_assert((WARPS + 1) * sizeof(T) <= S::BYTES || ALGORITHM != BLOCK_REDUCE_WARP_REDUCTIONS,
                "kport cub: BlockReduce storage too small");
  static_assert(BLOCK_THREADS * sizeof(T) <= S::BYTES || R::RAKERS == BLOCK_THREADS ||
                    ALGORITHM == BLOCK_REDUCE_WARP_REDUCTIONS,
                "kport cub: BlockReduce storage too small");

 public:
  BlockReduce(__KP_SITE)
      : slots_(reinterpret_cast<T*>(&__kp::private_storage<TempStorage>({__kp_line, __kp_col}))),
        tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}
  BlockReduce(TempStorage& temp_storage, __KP_SITE)
      : slots_(reinterpret_cast<T*>(&temp_storage)),
        tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}

  template <class ReductionOp>
  __KP_INLINE T Reduce(T input, ReductionOp reduction_op) {
    return reduce(input, reduction_op, BLOCK_THREADS);
  }
  template <class ReductionOp>
  __KP_INLINE T Reduce(T input, ReductionOp reduction_op, int num_valid) {
    return reduce(input, reduction_op, num_valid);
  }
  template <int ITEMS_PER_THREAD, class ReductionOp>
  __KP_INLINE T Reduce(T (&inputs)[ITEMS_PER_THREAD], ReductionOp reduction_op) {
    return reduce(__kp::thread_reduce(inputs, reduction_op), reduction_op, BLOCK_THREADS);
  }
  __KP_INLINE T Sum(T input) {
    ::cub::Sum op;
    return reduce(input, op, BLOCK_THREADS);
  }
  __KP_INLINE T Sum(T input, int num_valid) {
    ::cub::Sum op;
    return reduce(input, op, num_valid);
  }
  template <int ITEMS_PER_THREAD>
  __KP_INLINE T Sum(T (&inputs)[ITEMS_PER_THREAD]) {
    ::cub::Sum op;
    return reduce(__kp::thread_reduce(inputs, op), op, BLOCK_THREADS);
  }
};

}  // namespace cub
