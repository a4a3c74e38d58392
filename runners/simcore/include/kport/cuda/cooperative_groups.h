// Block-level cooperative groups: this_thread_block(), tiled_partition<N> tiles (N = 1..32),
// coalesced_threads(), reduce / inclusive_scan / exclusive_scan and the functors they take.
// Grid and cluster groups are not modelled (see cuda_unsupported.toml). Tile collectives are the
// warp primitives of sync.h with the tile's member mask and width, like CUDA's own tiles, so a tile
// in a partial last warp names lanes that do not exist (exited threads, for the hardware).
#pragma once
#pragma clang system_header
#include <kport/rt.h>
#include <kport/cuda/sync.h>
#include <kport/cuda/vector_types.h>

namespace cooperative_groups {

class thread_group;

class thread_block {
 public:
  static void sync(__KP_SITE) { __kp_barrier(__kp_line, __kp_col, 0, 0); }
  static unsigned int size() { return num_threads(); }
  static unsigned int num_threads() {
    const uint32_t __KP_RT* d = __kp_cur->tg_dispatch;
    return d[0] * d[1] * d[2];
  }
  static unsigned int thread_rank() { return __kp_cur->linear; }
  static dim3 group_index() { return dim3(__kp_cur->gid[0], __kp_cur->gid[1], __kp_cur->gid[2]); }
  static dim3 thread_index() { return dim3(__kp_cur->tid[0], __kp_cur->tid[1], __kp_cur->tid[2]); }
  static dim3 group_dim() {
    return dim3(__kp_cur->tg_dispatch[0], __kp_cur->tg_dispatch[1], __kp_cur->tg_dispatch[2]);
  }
  static dim3 dim_threads() { return group_dim(); }
  struct arrival_token {};
  arrival_token barrier_arrive() const { return {}; }
  void barrier_wait(arrival_token&&, __KP_SITE) const { __kp_barrier(__kp_line, __kp_col, 0, 0); }
  operator thread_group() const;
};

__KP_INLINE thread_block this_thread_block() { return thread_block(); }

namespace __kp_detail {
// Lanes of this thread's N-lane tile within its warp.
template <unsigned N>
__KP_INLINE unsigned tile_mask() {
  if constexpr (N == 32) return 0xFFFFFFFFu;
  else return ((1u << N) - 1u) << (__kp_cur->lane & ~(N - 1u));
}
}  // namespace __kp_detail

// Statically sized tile of a block; Parent = void is the type-erased form all tiles convert to.
template <unsigned N, class Parent = void>
class thread_block_tile;

template <unsigned N>
class thread_block_tile<N, void> {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tile size must be a power of 2 <= 32");

 protected:
  unsigned meta_rank_, meta_size_;

 public:
  thread_block_tile(unsigned meta_rank, unsigned meta_size)
      : meta_rank_(meta_rank), meta_size_(meta_size) {}
  static constexpr unsigned int num_threads() { return N; }
  static constexpr unsigned int size() { return N; }
  static unsigned int thread_rank() { return __kp_cur->lane & (N - 1u); }
  unsigned int meta_group_rank() const { return meta_rank_; }
  unsigned int meta_group_size() const { return meta_size_; }
  static unsigned int build_mask() { return __kp_detail::tile_mask<N>(); }

  void sync(__KP_SITE) const { __syncwarp(build_mask(), __kp_line, __kp_col); }
  template <class T>
  T shfl(T v, int src_rank, __KP_SITE) const {
    static_assert(sizeof(T) <= __KP_SLOT_BYTES, "shuffled type too large");
    return __kp_cuda::shfl<T>("tile.shfl", build_mask(), v, __kp_cuda::SHFL_IDX, (unsigned)src_rank, N,
                            __kp_line, __kp_col);
  }
  template <class T>
  T shfl_down(T v, unsigned int delta, __KP_SITE) const {
    static_assert(sizeof(T) <= __KP_SLOT_BYTES, "shuffled type too large");
    return __kp_cuda::shfl<T>("tile.shfl_down", build_mask(), v, __kp_cuda::SHFL_DOWN, delta, N,
                            __kp_line, __kp_col);
  }
  template <class T>
  T shfl_up(T v, unsigned int delta, __KP_SITE) const {
    static_assert(sizeof(T) <= __KP_SLOT_BYTES, "shuffled type too large");
    return __kp_cuda::shfl<T>("tile.shfl_up", build_mask(), v, __kp_cuda::SHFL_UP, delta, N, __kp_line,
                            __kp_col);
  }
  template <class T>
  T shfl_xor(T v, unsigned int lane_mask, __KP_SITE) const {
    static_assert(sizeof(T) <= __KP_SLOT_BYTES, "shuffled type too large");
    return __kp_cuda::shfl<T>("tile.shfl_xor", build_mask(), v, __kp_cuda::SHFL_BFLY, lane_mask, N,
                            __kp_line, __kp_col);
  }
  // Votes report bits in tile-rank order.
  unsigned int ballot(int pred, __KP_SITE) const {
    unsigned m = build_mask();
    return __ballot_sync(m, pred, __kp_line, __kp_col) >> __builtin_ctz(m);
  }
  int any(int pred, __KP_SITE) const {
    return __ballot_sync(build_mask(), pred, __kp_line, __kp_col) != 0;
  }
  int all(int pred, __KP_SITE) const {
    unsigned m = build_mask();
    return __ballot_sync(m, pred, __kp_line, __kp_col) == m;
  }
  template <class T>
  unsigned int match_any(T v, __KP_SITE) const {
    unsigned m = build_mask();
    return __match_any_sync(m, v, __kp_line, __kp_col) >> __builtin_ctz(m);
  }
  template <class T>
  unsigned int match_all(T v, int& pred, __KP_SITE) const {
    unsigned m = build_mask();
    return __match_all_sync(m, v, &pred, __kp_line, __kp_col) >> __builtin_ctz(m);
  }
  operator thread_group() const;
};

template <unsigned N, class Parent>
class thread_block_tile : public thread_block_tile<N, void> {
 public:
  thread_block_tile(unsigned meta_rank, unsigned meta_size)
      : thread_block_tile<N, void>(meta_rank, meta_size) {}
};

template <unsigned N>
__KP_INLINE thread_block_tile<N, thread_block> tiled_partition(const thread_block&) {
  unsigned size = thread_block::num_threads();
  return thread_block_tile<N, thread_block>(__kp_cur->linear / N, (size + N - 1) / N);
}
template <unsigned N, unsigned M, class P>
__KP_INLINE thread_block_tile<N, thread_block_tile<M, P>> tiled_partition(
    const thread_block_tile<M, P>&) {
  static_assert(N <= M, "a tile can only be split into smaller tiles");
  return thread_block_tile<N, thread_block_tile<M, P>>((__kp_cur->lane & (M - 1u)) / N, M / N);
}

// Type-erased group: the whole block, or a tile of up to 32 lanes.
class thread_group {
  bool block_;
  unsigned size_, mask_;

 public:
  thread_group(bool block, unsigned size, unsigned mask)
      : block_(block), size_(size), mask_(mask) {}
  unsigned int size() const { return size_; }
  unsigned int num_threads() const { return size_; }
  unsigned int thread_rank() const {
    return block_ ? __kp_cur->linear
                  : (unsigned)__builtin_popcount(mask_ & ((1u << __kp_cur->lane) - 1u));
  }
  void sync(__KP_SITE) const {
    if (block_)
      __kp_barrier(__kp_line, __kp_col, 0, 0);
    else
      __syncwarp(mask_, __kp_line, __kp_col);
  }
  bool is_block() const { return block_; }
  unsigned int __kp_mask() const { return mask_; }
};
inline thread_block::operator thread_group() const { return thread_group(true, num_threads(), 0); }
template <unsigned N>
inline thread_block_tile<N, void>::operator thread_group() const {
  return thread_group(false, N, build_mask());
}
// Dynamic partition into tiles of `n` threads (a power of 2 up to 32 here).
__KP_INLINE thread_group tiled_partition(const thread_group& parent, unsigned int n, __KP_SITE) {
  if (n == 0 || n > 32 || (n & (n - 1)) || (!parent.is_block() && n > parent.size()))
    __kp_fatal(__KP_F_UNSUPPORTED, __kp_line,
             "tiled_partition(group, n): only power-of-2 tiles of up to 32 threads are modelled");
  unsigned base = __kp_cur->lane & ~(n - 1u);
  return thread_group(false, n, n == 32 ? 0xFFFFFFFFu : ((1u << n) - 1u) << base);
}

// The lanes of the warp that are executing this call together.
class coalesced_group {
  unsigned mask_;

 public:
  explicit coalesced_group(unsigned mask) : mask_(mask) {}
  unsigned int size() const { return (unsigned)__builtin_popcount(mask_); }
  unsigned int num_threads() const { return size(); }
  unsigned int thread_rank() const {
    return (unsigned)__builtin_popcount(mask_ & ((1u << __kp_cur->lane) - 1u));
  }
  unsigned int meta_group_rank() const { return 0; }
  unsigned int meta_group_size() const { return 1; }
  void sync(__KP_SITE) const { __syncwarp(mask_, __kp_line, __kp_col); }
  // Rank-addressed shuffles: rank r is the r-th lane of the mask.
  template <class T>
  T shfl(T v, unsigned int src_rank, __KP_SITE) const {
    unsigned lane = __fns(mask_, 0, (int)(src_rank % size()) + 1);
    return __kp_cuda::shfl<T>("coalesced.shfl", mask_, v, __kp_cuda::SHFL_IDX, lane, 32, __kp_line,
                            __kp_col);
  }
  template <class T>
  T shfl_down(T v, unsigned int delta, __KP_SITE) const {
    unsigned r = thread_rank() + delta;
    unsigned lane = r < size() ? __fns(mask_, 0, (int)r + 1) : __kp_cur->lane;
    return __kp_cuda::shfl<T>("coalesced.shfl_down", mask_, v, __kp_cuda::SHFL_IDX, lane, 32, __kp_line,
                            __kp_col);
  }
  template <class T>
  T shfl_up(T v, unsigned int delta, __KP_SITE) const {
    unsigned r = thread_rank();
    unsigned lane = r >= delta ? __fns(mask_, 0, (int)(r - delta) + 1) : __kp_cur->lane;
    return __kp_cuda::shfl<T>("coalesced.shfl_up", mask_, v, __kp_cuda::SHFL_IDX, lane, 32, __kp_line,
                            __kp_col);
  }
  unsigned int ballot(int pred, __KP_SITE) const {  // compressed to rank order
    unsigned b = __ballot_sync(mask_, pred, __kp_line, __kp_col), r = 0, i = 0;
    for (unsigned m = mask_; m; m &= m - 1, ++i)
      if (b >> __builtin_ctz(m) & 1u) r |= 1u << i;
    return r;
  }
  int any(int pred, __KP_SITE) const { return __ballot_sync(mask_, pred, __kp_line, __kp_col) != 0; }
  int all(int pred, __KP_SITE) const { return __ballot_sync(mask_, pred, __kp_line, __kp_col) == mask_; }
  operator thread_group() const { return thread_group(false, size(), mask_); }
};
__KP_INLINE coalesced_group coalesced_threads(__KP_SITE) {
  return coalesced_group(__activemask(__kp_line, __kp_col));
}

template <class G>
__KP_INLINE void sync(const G& g, __KP_SITE) {
  g.sync(__kp_line, __kp_col);
}
template <class G>
__KP_INLINE unsigned int thread_rank(const G& g) {
  return g.thread_rank();
}
template <class G>
__KP_INLINE unsigned int group_size(const G& g) {
  return g.size();
}

// ---- Functors and collectives (cooperative_groups/reduce.h, scan.h) -----------------------------
template <class T>
struct plus {
  T operator()(const T& a, const T& b) const { return a + b; }
};
template <class T>
struct less {
  T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
template <class T>
struct greater {
  T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
template <class T>
struct bit_and {
  T operator()(const T& a, const T& b) const { return a & b; }
};
template <class T>
struct bit_or {
  T operator()(const T& a, const T& b) const { return a | b; }
};
template <class T>
struct bit_xor {
  T operator()(const T& a, const T& b) const { return a ^ b; }
};

// Butterfly from size/2 down to 1, own value on the left: every lane gets the result.
template <unsigned N, class P, class T, class Op>
__KP_INLINE T reduce(const thread_block_tile<N, P>& g, T v, Op op, __KP_SITE) {
  for (unsigned m = N / 2; m > 0; m >>= 1) v = op(v, g.shfl_xor(v, m, __kp_line, __kp_col));
  return v;
}
template <class T, class Op>
__KP_INLINE T reduce(const coalesced_group& g, T v, Op op, __KP_SITE) {
  // Rank-ordered tree over shfl_down, then broadcast from rank 0.
  for (unsigned d = 1; d < g.size(); d <<= 1) {
    T o = g.shfl_down(v, d, __kp_line, __kp_col);
    if (g.thread_rank() % (2 * d) == 0 && g.thread_rank() + d < g.size()) v = op(v, o);
  }
  return g.shfl(v, 0, __kp_line, __kp_col);
}
template <class G, class T, class Op>
__KP_INLINE T inclusive_scan(const G& g, T v, Op op, __KP_SITE) {
  for (unsigned d = 1; d < g.size(); d <<= 1) {
    T o = g.shfl_up(v, d, __kp_line, __kp_col);
    if (d <= g.thread_rank()) v = op(v, o);
  }
  return v;
}
template <class G, class T>
__KP_INLINE T inclusive_scan(const G& g, T v, __KP_SITE) {
  return inclusive_scan(g, v, plus<T>(), __kp_line, __kp_col);
}
template <class G, class T, class Op>
__KP_INLINE T exclusive_scan(const G& g, T v, Op op, __KP_SITE) {
  T r = g.shfl_up(inclusive_scan(g, v, op, __kp_line, __kp_col), 1, __kp_line, __kp_col);
  return g.thread_rank() == 0 ? T{} : r;
}
template <class G, class T>
__KP_INLINE T exclusive_scan(const G& g, T v, __KP_SITE) {
  return exclusive_scan(g, v, plus<T>(), __kp_line, __kp_col);
}

}  // namespace cooperative_groups
