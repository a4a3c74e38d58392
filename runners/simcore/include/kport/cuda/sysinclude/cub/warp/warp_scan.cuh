// cub::WarpScan (kport's own, from CUB's documentation): prefix scans across a logical warp of
// LOGICAL_WARP_THREADS lanes, in a shuffle-up (Kogge-Stone) order as CUB's. Exclusive scans without
// an initial value leave the first lane undefined: it gets a poison value. warp_aggregate is the
// inclusive result of the logical warp's last lane, given to every lane.
#pragma once
#pragma clang system_header
#include <cub/detail/kport_core.cuh>
#include <cub/detail/kport_sizes.cuh>

namespace cub {

template <class T, int LOGICAL_WARP_THREADS = 32, int LEGACY_PTX_ARCH = 0>
class WarpScan {
  static constexpr int L = LOGICAL_WARP_THREADS;
  static_assert(L >= 1 && L <= 32, "cub::WarpScan: LOGICAL_WARP_THREADS must be 1..32");
  using S = __kp::warp_scan_size<T, L>;

 public:
  struct TempStorage : __kp::raw_storage<S::BYTES, S::ALIGN> {};

 private:
  __kp::site site_;

  // The scan of the calling lane's logical warp: this lane's inclusive result (incl), the one
  // before it (prev, poison for the first lane) and the last lane's (aggregate).
  struct result {
    T incl, prev, aggregate;
  };
  template <class Op>
  __KP_INLINE result scan(const T& input, Op& op, bool want_aggregate) {
    unsigned lane = __kp_cur->lane, first = lane / L * L, p = lane - first;
    unsigned n = 32 - first < (unsigned)L ? 32 - first : (unsigned)L;
    T all[32];
    uint32_t got = __kp::gather(input, __kp::lane_mask(first, n), site_, all);
    unsigned have = 0;  // lanes present from the first one on
    while (have < n && ((got >> (first + have)) & 1u)) have++;
    T* v = all + first;
    __kp::tree_scan(v, (int)have, op);
    unsigned tid0 = __kp_cur->linear - p;
    if (p >= have) __kp::missing_lane("cub::WarpScan", site_.line, tid0 + have);
    result r{p < have ? v[p] : __kp::poison<T>(),
             p == 0 || p > have ? __kp::poison<T>() : v[p - 1], __kp::poison<T>()};
    if (have == (unsigned)L) r.aggregate = v[L - 1];
    else if (want_aggregate && p == 0) __kp::missing_lane("cub::WarpScan aggregate", site_.line,
                                                          tid0 + have);
    return r;
  }
  __KP_INLINE bool first_lane() const { return __kp_cur->lane % L == 0; }

 public:
  WarpScan(TempStorage&, __KP_SITE) : site_{__kp_line, __kp_col} {}

  __KP_INLINE void InclusiveSum(T input, T& inclusive_output) { InclusiveScan(input, inclusive_output, Sum()); }
  __KP_INLINE void InclusiveSum(T input, T& inclusive_output, T& warp_aggregate) {
    InclusiveScan(input, inclusive_output, Sum(), warp_aggregate);
  }
  __KP_INLINE void ExclusiveSum(T input, T& exclusive_output) {
    ExclusiveScan(input, exclusive_output, T{}, Sum());
  }
  __KP_INLINE void ExclusiveSum(T input, T& exclusive_output, T& warp_aggregate) {
    ExclusiveScan(input, exclusive_output, T{}, Sum(), warp_aggregate);
  }

  template <class ScanOp>
  __KP_INLINE void InclusiveScan(T input, T& inclusive_output, ScanOp scan_op) {
    inclusive_output = scan(input, scan_op, false).incl;
  }
  template <class ScanOp>
  __KP_INLINE void InclusiveScan(T input, T& inclusive_output, ScanOp scan_op, T& warp_aggregate) {
    result r = scan(input, scan_op, true);
    inclusive_output = r.incl;
    warp_aggregate = r.aggregate;
  }
  template <class ScanOp>
  __KP_INLINE void InclusiveScan(T input, T& inclusive_output, T initial_value, ScanOp scan_op) {
    inclusive_output = scan_op(initial_value, scan(input, scan_op, false).incl);
  }
  template <class ScanOp>
  __KP_INLINE void InclusiveScan(T input, T& inclusive_output, T initial_value, ScanOp scan_op,
                     T& warp_aggregate) {
    result r = scan(input, scan_op, true);
    inclusive_output = scan_op(initial_value, r.incl);
    warp_aggregate = r.aggregate;
  }

  template <class ScanOp>
  __KP_INLINE void ExclusiveScan(T input, T& exclusive_output, ScanOp scan_op) {
    exclusive_output = scan(input, scan_op, false).prev;
  }
  template <class ScanOp>
  __KP_INLINE void ExclusiveScan(T input, T& exclusive_output, ScanOp scan_op, T& warp_aggregate) {
    result r = scan(input, scan_op, true);
    exclusive_output = r.prev;
    warp_aggregate = r.aggregate;
  }
  template <class ScanOp>
  __KP_INLINE void ExclusiveScan(T input, T& exclusive_output, T initial_value, ScanOp scan_op) {
    result r = scan(input, scan_op, false);
    exclusive_output = first_lane() ? initial_value : scan_op(initial_value, r.prev);
  }
  template <class ScanOp>
  __KP_INLINE void ExclusiveScan(T input, T& exclusive_output, T initial_value, ScanOp scan_op,
                     T& warp_aggregate) {
    result r = scan(input, scan_op, true);
    exclusive_output = first_lane() ? initial_value : scan_op(initial_value, r.prev);
    warp_aggregate = r.aggregate;
  }

  template <class ScanOp>
  __KP_INLINE void Scan(T input, T& inclusive_output, T& exclusive_output, ScanOp scan_op) {
    result r = scan(input, scan_op, false);
    inclusive_output = r.incl;
    exclusive_output = r.prev;
  }
  template <class ScanOp>
  __KP_INLINE void Scan(T input, T& inclusive_output, T& exclusive_output, T initial_value, ScanOp scan_op) {
    result r = scan(input, scan_op, false);
    inclusive_output = r.incl;
    exclusive_output = first_lane() ? initial_value : scan_op(initial_value, r.prev);
  }

  // The value of lane src_lane of the calling lane's logical warp.
  __KP_INLINE T Broadcast(T input, unsigned int src_lane) {
    unsigned lane = __kp_cur->lane, first = lane / L * L;
    unsigned n = 32 - first < (unsigned)L ? 32 - first : (unsigned)L;
    T all[32];
    uint32_t got = __kp::gather(input, __kp::lane_mask(first, n), site_, all);
    unsigned src = first + src_lane % (unsigned)L;
    if (src < 32 && ((got >> src) & 1u)) return all[src];
    __kp::missing_lane("cub::WarpScan::Broadcast", site_.line, __kp_cur->linear - lane + src);
    return __kp::poison<T>();
  }
};

}  // namespace cub
