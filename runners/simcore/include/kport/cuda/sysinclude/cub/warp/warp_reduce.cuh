// cub::WarpReduce (kport's own, from CUB's documentation): reductions across a logical warp of
// LOGICAL_WARP_THREADS lanes (warps of consecutive lanes inside each hardware warp). The result is
// defined in the first lane of the logical warp only; the other lanes get a poison value. The order
// of operations is a shuffle-down tree (offsets 1, 2, 4, ...), as CUB's.
#pragma once
#pragma clang system_header
#include <cub/detail/kport_core.cuh>
#include <cub/detail/kport_sizes.cuh>

namespace cub {

template <class T, int LOGICAL_WARP_THREADS = 32, int LEGACY_PTX_ARCH = 0>
class WarpReduce {
  static constexpr int L = LOGICAL_WARP_THREADS;
  static_assert(L >= 1 && L <= 32, "cub::WarpReduce: LOGICAL_WARP_THREADS must be 1..32");
  using S = __kp::warp_reduce_size<T, L>;

 public:
  struct TempStorage : __kp::raw_storage<S::BYTES, S::ALIGN> {};

 private:
  __kp::site site_;

  template <class Op>
  __KP_INLINE T reduce(const T& input, Op& op, int valid) {
    unsigned lane = __kp_cur->lane, first = lane / L * L;
    unsigned n = 32 - first < (unsigned)L ? 32 - first : (unsigned)L;
    T all[32];
    uint32_t got = __kp::gather(input, __kp::lane_mask(first, n), site_, all);
    int v = valid < (int)n ? (valid < 1 ? 1 : valid) : (int)n;
    __kp::check_lanes(all + first, (unsigned)v, got, first, "cub::WarpReduce", site_,
                      __kp_cur->linear - (lane - first));
    T r = __kp::tree_reduce(all + first, L, v, op);
    return lane == first ? r : __kp::poison<T>();
  }

 public:
  WarpReduce(TempStorage&, __KP_SITE) : site_{__kp_line, __kp_col} {}

  __KP_INLINE T Sum(T input) {
    Sum_ op;
    return reduce(input, op, L);
  }
  __KP_INLINE T Sum(T input, int valid_items) {
    Sum_ op;
    return reduce(input, op, valid_items);
  }
  template <class ReductionOp>
  __KP_INLINE T Reduce(T input, ReductionOp reduction_op) {
    return reduce(input, reduction_op, L);
  }
  template <class ReductionOp>
  __KP_INLINE T Reduce(T input, ReductionOp reduction_op, int valid_items) {
    return reduce(input, reduction_op, valid_items);
  }

 private:
  using Sum_ = ::cub::Sum;
};

}  // namespace cub
