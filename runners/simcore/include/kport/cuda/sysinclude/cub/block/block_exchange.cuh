// cub::BlockExchange (kport's own, from CUB's documentation): rearranges the items of a block
// between blocked, striped and warp-striped arrangements through shared memory, with CUB's
// storage sizes and barriers (block-wide: write, __syncthreads, read; warp-wide: write, __syncwarp,
// read; time-sliced: one warp's share of the buffer at a time, a barrier around each slice). No
// barrier follows the read: reusing the storage needs the caller's __syncthreads(), as in CUB.
#pragma once
#pragma clang system_header
#include <cub/detail/kport_core.cuh>
#include <cub/detail/kport_sizes.cuh>

namespace cub {
namespace __kp {

// The exchange buffer of BlockExchange<T, BLOCK_THREADS, IPT, TIME_SLICED>: CUB's sizes, with a
// padding word per 32 items when IPT is a power of two above 4 (bank-conflict padding).
template <class T, int BLOCK_THREADS, int IPT, bool TIME_SLICED>
struct exchange_layout {
  static constexpr int WARPS = (BLOCK_THREADS + 31) / 32;
  static constexpr int SLICE_THREADS = TIME_SLICED ? (BLOCK_THREADS < 32 ? BLOCK_THREADS : 32)
                                                   : BLOCK_THREADS;
  static constexpr int SLICE_ITEMS = SLICE_THREADS * IPT;
  static constexpr int SLICES = TIME_SLICED ? WARPS : 1;
  static constexpr bool PAD = IPT > 4 && (IPT & (IPT - 1)) == 0;
  static constexpr int ITEMS = SLICE_ITEMS + (PAD ? SLICE_ITEMS >> 5 : 0);
  static constexpr int at(int i) { return PAD ? i + (i >> 5) : i; }
};

// Moves items through `buf`: input item i goes to tile position dst(i), output item i comes from
// src(i). Time-sliced, the tile passes in windows of SLICE_ITEMS, window s read by warp s only
// when `warp_reads` (blocked outputs), by whoever holds its positions otherwise.
template <class L, int IPT, class T, class Dst, class Src>
__KP_INLINE void exchange(T* buf, const T (&in)[IPT], T (&out)[IPT], Dst dst, Src src, site s) {
  T v[IPT];
  for (int i = 0; i < IPT; i++) v[i] = in[i];
  for (int slice = 0; slice < L::SLICES; slice++) {
    int lo = slice * L::SLICE_ITEMS, hi = lo + L::SLICE_ITEMS;
    if (L::SLICES > 1) barrier(s);
    for (int i = 0; i < IPT; i++) {
      int p = dst(i);
      if (p >= lo && p < hi) buf[L::at(p - lo)] = v[i];
    }
    barrier(s);
    for (int i = 0; i < IPT; i++) {
      int p = src(i);
      if (p >= lo && p < hi) out[i] = buf[L::at(p - lo)];
    }
  }
}

// The same within each warp: warp w's tile of 32 * IPT items (time-sliced: one warp at a time).
template <class L, int IPT, class T, class Dst, class Src>
__KP_INLINE void warp_exchange(T* buf, const T (&in)[IPT], T (&out)[IPT], int warp, Dst dst,
                               Src src, site s) {
  T v[IPT];
  for (int i = 0; i < IPT; i++) v[i] = in[i];
  int base = L::SLICES > 1 ? 0 : warp * 32 * IPT;
  for (int slice = 0; slice < L::SLICES; slice++) {
    if (L::SLICES > 1) barrier(s);
    if (L::SLICES > 1 && slice != warp) continue;
    for (int i = 0; i < IPT; i++) buf[L::at(base + dst(i))] = v[i];
    warp_barrier(s);
    for (int i = 0; i < IPT; i++) out[i] = buf[L::at(base + src(i))];
  }
}

}  // namespace __kp

template <class T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, bool WARP_TIME_SLICING = false,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockExchange {
  static constexpr int BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr int IPT = ITEMS_PER_THREAD;
  using L = __kp::exchange_layout<T, BLOCK_THREADS, IPT, WARP_TIME_SLICING>;

 public:
  struct TempStorage : __kp::raw_storage<__kp::round_up(L::ITEMS * sizeof(T), 16), 16> {};

 private:
  T* buf_;
  int tid_;
  __kp::site site_;
  int warp() const { return tid_ / 32; }
  int lane() const { return tid_ % 32; }

 public:
  BlockExchange(__KP_SITE)
      : buf_(reinterpret_cast<T*>(&__kp::private_storage<TempStorage>({__kp_line, __kp_col}))),
        tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}
  BlockExchange(TempStorage& temp_storage, __KP_SITE)
      : buf_(reinterpret_cast<T*>(&temp_storage)),
        tid_(__kp::linear_tid<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>()),
        site_{__kp_line, __kp_col} {}

  // Thread t owns items i*BLOCK_THREADS + t (striped) / t*IPT + i (blocked).
  template <class OutputT>
  __KP_INLINE void StripedToBlocked(const T (&input)[IPT], OutputT (&output)[IPT]) {
    int t = tid_;
    exchange_into<false>(input, output, [t](int i) { return i * BLOCK_THREADS + t; },
                         [t](int i) { return t * IPT + i; });
  }
  template <class OutputT>
  __KP_INLINE void BlockedToStriped(const T (&input)[IPT], OutputT (&output)[IPT]) {
    int t = tid_;
    exchange_into<false>(input, output, [t](int i) { return t * IPT + i; },
                         [t](int i) { return i * BLOCK_THREADS + t; });
  }
  // Warp-striped: warp w owns the w-th run of 32*IPT items, lane l items l + 32*i of it.
  template <class OutputT>
  __KP_INLINE void WarpStripedToBlocked(const T (&input)[IPT], OutputT (&output)[IPT]) {
    int l = lane();
    exchange_into<true>(input, output, [l](int i) { return i * 32 + l; },
                        [l](int i) { return l * IPT + i; });
  }
  template <class OutputT>
  __KP_INLINE void BlockedToWarpStriped(const T (&input)[IPT], OutputT (&output)[IPT]) {
    int l = lane();
    exchange_into<true>(input, output, [l](int i) { return l * IPT + i; },
                        [l](int i) { return i * 32 + l; });
  }
  // Item i goes to tile position ranks[i].
  template <class OutputT, class OffsetT>
  __KP_INLINE void ScatterToBlocked(const T (&input)[IPT], OutputT (&output)[IPT],
                        const OffsetT (&ranks)[IPT]) {
    int t = tid_;
    exchange_into<false>(input, output, [&ranks](int i) { return (int)ranks[i]; },
                         [t](int i) { return t * IPT + i; });
  }
  template <class OutputT, class OffsetT>
  __KP_INLINE void ScatterToStriped(const T (&input)[IPT], OutputT (&output)[IPT],
                        const OffsetT (&ranks)[IPT]) {
    int t = tid_;
    exchange_into<false>(input, output, [&ranks](int i) { return (int)ranks[i]; },
                         [t](int i) { return i * BLOCK_THREADS + t; });
  }
  // In-place forms of older CUB.
  __KP_INLINE void StripedToBlocked(T (&items)[IPT]) { StripedToBlocked(items, items); }
  __KP_INLINE void BlockedToStriped(T (&items)[IPT]) { BlockedToStriped(items, items); }
  __KP_INLINE void WarpStripedToBlocked(T (&items)[IPT]) { WarpStripedToBlocked(items, items); }
  __KP_INLINE void BlockedToWarpStriped(T (&items)[IPT]) { BlockedToWarpStriped(items, items); }
  template <class OffsetT>
  __KP_INLINE void ScatterToBlocked(T (&items)[IPT], const OffsetT (&ranks)[IPT]) {
    ScatterToBlocked(items, items, ranks);
  }
  template <class OffsetT>
  __KP_INLINE void ScatterToStriped(T (&items)[IPT], const OffsetT (&ranks)[IPT]) {
    ScatterToStriped(items, items, ranks);
  }

 private:
  template <bool WARP, class OutputT, class Dst, class Src>
  __KP_INLINE void exchange_into(const T (&input)[IPT], OutputT (&output)[IPT], Dst dst, Src src) {
    T out[IPT];
    __kp::check_block("cub::BlockExchange", site_, BLOCK_THREADS, tid_);
    if constexpr (WARP) {
      static_assert(BLOCK_THREADS % 32 == 0,
                    "cub warp-striped exchanges need a block of whole warps (a multiple of 32)");
      __kp::warp_exchange<L, IPT>(buf_, input, out, warp(), dst, src, site_);
    } else {
      __kp::exchange<L, IPT>(buf_, input, out, dst, src, site_);
    }
    for (int i = 0; i < IPT; i++) output[i] = out[i];
  }
};

}  // namespace cub
