// kport's own CUB (block and warp collectives) for cuda_sim: written from CUB's public
// documentation, not from NVIDIA's code. This part: version macros, functors, small utilities and
// the machinery the collectives share (call sites, storage, warp gathers, poison, thread scans).
// Results CUB leaves undefined are poisoned, and a lane a collective needs but that did not take
// part is reported, so a port that leans on either fails loudly.
#pragma once
#pragma clang system_header
#include <kport/cuda_runtime.h>

// CUB 2.7 (CUDA 12.8, the toolkit the shim claims): code that tests the version picks the
// cub::Sum / cub::Max spellings, which this CUB has.
#define CUB_VERSION 200700
#define CUB_MAJOR_VERSION 2
#define CUB_MINOR_VERSION 7
#define CUB_SUBMINOR_VERSION 0
#define CUB_PATCH_NUMBER 0
// CCCL 2.7.0, the release that CUB 2.7 ships in (CCCL_VERSION is MMMmmmppp): code that tests it
// (llama.cpp's argsort: CCCL >= 3.1 for cuda::make_strided_iterator) takes its CCCL 2 path.
#define CCCL_VERSION 2007000
#define CCCL_MAJOR_VERSION (CCCL_VERSION / 1000000)
#define CCCL_MINOR_VERSION (((CCCL_VERSION / 1000) % 1000))
#define CCCL_PATCH_VERSION (CCCL_VERSION % 1000)
#define CUB_NAMESPACE_BEGIN namespace cub {
#define CUB_NAMESPACE_END }
#define CUB_NS_QUALIFIER ::cub
#define CUB_PTX_ARCH __CUDA_ARCH__
#define CUB_RUNTIME_FUNCTION
#define CUB_WARP_THREADS(arch) 32
#define CUB_LOG_WARP_THREADS(arch) 5
#define CUB_MAX(a, b) (((b) > (a)) ? (b) : (a))
#define CUB_MIN(a, b) (((b) < (a)) ? (b) : (a))
#define CUB_QUOTIENT_CEILING(x, y) (((x) + (y) - 1) / (y))
#define CUB_ROUND_UP_NEAREST(x, y) ((((x) + (y) - 1) / (y)) * (y))

namespace cub {

// ---- Functors (cub/thread/thread_operators.cuh) -------------------------------------------------
struct Sum {
  template <class A, class B>
  constexpr auto operator()(const A& a, const B& b) const { return a + b; }
};
struct Max {
  template <class A, class B>
  constexpr auto operator()(const A& a, const B& b) const { return CUB_MAX(a, b); }
};
struct Min {
  template <class A, class B>
  constexpr auto operator()(const A& a, const B& b) const { return CUB_MIN(a, b); }
};
struct Equality {
  template <class A, class B>
  constexpr bool operator()(const A& a, const B& b) const { return a == b; }
};
struct Inequality {
  template <class A, class B>
  constexpr bool operator()(const A& a, const B& b) const { return a != b; }
};
struct Difference {
  template <class A, class B>
  constexpr auto operator()(const A& a, const B& b) const { return a - b; }
};

template <class K, class V>
struct KeyValuePair {
  using Key = K;
  using Value = V;
  K key;
  V value;
  KeyValuePair() = default;
  constexpr KeyValuePair(const K& k, const V& v) : key(k), value(v) {}
  constexpr bool operator!=(const KeyValuePair& b) const { return value != b.value || key != b.key; }
};
// The pair with the larger (smaller) value; the smaller key on ties.
struct ArgMax {
  template <class K, class V>
  constexpr KeyValuePair<K, V> operator()(const KeyValuePair<K, V>& a,
                                          const KeyValuePair<K, V>& b) const {
    return (b.value > a.value || (!(b.value < a.value) && b.key < a.key)) ? b : a;
  }
};
struct ArgMin {
  template <class K, class V>
  constexpr KeyValuePair<K, V> operator()(const KeyValuePair<K, V>& a,
                                          const KeyValuePair<K, V>& b) const {
    return (b.value < a.value || (!(a.value < b.value) && b.key < a.key)) ? b : a;
  }
};

// ---- Utilities ----------------------------------------------------------------------------------
struct NullType {};
template <int N>
struct Int2Type {
  enum { VALUE = N };
};
template <int N>
struct PowerOfTwo {
  enum { VALUE = N > 0 && (N & (N - 1)) == 0 };
};
template <int N>
struct Log2 {  // ceiling of log2(N)
  enum { VALUE = N <= 1 ? 0 : 1 + Log2<(N + 1) / 2>::VALUE };
};
template <>
struct Log2<1> {
  enum { VALUE = 0 };
};
template <>
struct Log2<0> {
  enum { VALUE = 0 };
};
// Storage for a T without running its constructor (for unions in __shared__ memory).
template <class T>
struct alignas(T) Uninitialized {
  unsigned char storage[sizeof(T)];
  T& Alias() { return *reinterpret_cast<T*>(storage); }
};

__KP_INLINE int RowMajorTid(int block_dim_x, int block_dim_y, int block_dim_z) {
  const uint32_t __KP_RT* t = __kp_cur->tid;
  return (block_dim_z == 1 ? 0 : (int)t[2] * block_dim_x * block_dim_y) +
         (block_dim_y == 1 ? 0 : (int)t[1] * block_dim_x) + (int)t[0];
}
__KP_INLINE unsigned int LaneId() { return __kp_cur->lane; }
__KP_INLINE unsigned int WarpId() { return __kp_cur->simd; }
template <int LOGICAL_WARP_THREADS>
__KP_INLINE unsigned int WarpMask(unsigned int warp_id) {
  unsigned m = LOGICAL_WARP_THREADS >= 32 ? 0xFFFFFFFFu : (1u << LOGICAL_WARP_THREADS) - 1u;
  return PowerOfTwo<LOGICAL_WARP_THREADS>::VALUE ? m << (warp_id * LOGICAL_WARP_THREADS) : m;
}
__KP_INLINE void CTA_SYNC(__KP_SITE) { __kp_barrier(__kp_line, __kp_col, 0, 0); }
__KP_INLINE void WARP_SYNC(unsigned int mask, __KP_SITE) { __syncwarp(mask, __kp_line, __kp_col); }

// ---- What the collectives share -----------------------------------------------------------------
namespace __kp {

// Where the user made the collective: its barriers and warp rendezvous are reported there.
struct site {
  unsigned line, col;
};

// TempStorage: opaque bytes of CUB's size and alignment, trivially constructible (unions).
template <size_t BYTES, size_t ALIGN>
struct alignas(ALIGN) raw_storage {
  unsigned char bytes[BYTES > 0 ? BYTES : 1];
};

// The block's own storage for a collective made without a TempStorage (one per storage type).
template <class S>
__KP_INLINE S& private_storage(site s) {
  static char key;
  return *reinterpret_cast<S*>(__kp_tg_alloc(&key, sizeof(S), alignof(S),
                                             "cub private TempStorage", s.line));
}

__KP_INLINE void barrier(site s) { __kp_barrier(s.line, s.col, 0, 0); }
__KP_INLINE void warp_barrier(site s) {
  const unsigned char* snap;
  __kp_cuda::warp_sync("cub warp exchange", nullptr, 0, 0xFFFFFFFFu, s.line, s.col, &snap);
}

template <int X, int Y, int Z>
__KP_INLINE int linear_tid() { return RowMajorTid(X, Y, Z); }

// CUB's undefined results: NaN (with kport's 0xBE payload) in every float lane, 0xBE bytes else.
template <class T>
__KP_INLINE T poison() {
  if constexpr (__is_same(T, float1) || __is_same(T, float2) || __is_same(T, float3) ||
                __is_same(T, float4)) {
    T v;
    float* f = reinterpret_cast<float*>(&v);
    for (unsigned i = 0; i < sizeof(T) / sizeof(float); i++) f[i] = __kp_cuda::poison<float>();
    return v;
  } else if constexpr (__is_same(T, double1) || __is_same(T, double2) || __is_same(T, double3) ||
                       __is_same(T, double4)) {
    T v;
    double* f = reinterpret_cast<double*>(&v);
    for (unsigned i = 0; i < sizeof(T) / sizeof(double); i++) f[i] = __kp_cuda::poison<double>();
    return v;
  } else {
    return __kp_cuda::poison<T>();
  }
}

[[gnu::cold, gnu::noinline]] inline void missing_lane(const char* what, unsigned line,
                                                      unsigned tid) {
  char msg[240];
  snprintf(msg, sizeof msg,
           "%s: thread %u, whose value this collective needs, did not take part (it exited, "
           "diverged, or the block has fewer threads than the collective's size); its value "
           "is poisoned", what, tid);
  __kp_report(__KP_F_INVALID, line, msg);
}

// A collective for `need` threads run by a smaller block reads values nobody wrote: say so once.
[[gnu::cold, gnu::noinline]] inline void short_block(const char* what, unsigned line, int need) {
  const uint32_t __KP_RT* d = __kp_cur->tg_size;
  char msg[320];
  snprintf(msg, sizeof msg,
           "%s is sized for %d threads but the block has %u; it reads the values of threads "
           "that do not exist (size it to the block, or pass num_valid where the call takes one)",
           what, need, d[0] * d[1] * d[2]);
  __kp_report(__KP_F_INVALID, line, msg);
}
__KP_INLINE void check_block(const char* what, site s, int need, int tid) {
  const uint32_t __KP_RT* d = __kp_cur->tg_size;
  if (__builtin_expect(tid == 0 && (int)(d[0] * d[1] * d[2]) < need, 0))
    short_block(what, s.line, need);
}

// Every lane's value of T at this rendezvous of the calling warp: all[l] for lane l in the
// returned mask (types over one slot travel in several rounds). `need`: the lanes that must come.
template <class T>
__KP_INLINE uint32_t gather(const T& mine, uint32_t need, site s, T* all) {
  constexpr unsigned SLOT = __KP_SLOT_BYTES;
  uint32_t got = 0xFFFFFFFFu;
  for (unsigned off = 0; off < sizeof(T); off += SLOT) {
    unsigned n = sizeof(T) - off < SLOT ? (unsigned)(sizeof(T) - off) : SLOT;
    const unsigned char* snap;
    uint32_t m = (uint32_t)__kp_simd_sync(reinterpret_cast<const unsigned char*>(&mine) + off, n,
                                          s.line, s.col, need, &snap);
    got &= m;
    for (; m; m &= m - 1) {
      unsigned l = (unsigned)__builtin_ctz(m);
      __builtin_memcpy(reinterpret_cast<unsigned char*>(&all[l]) + off, snap + l * SLOT, n);
    }
  }
  return got;
}

// The lanes [first, first + n) of a warp, as a mask.
__KP_INLINE constexpr uint32_t lane_mask(unsigned first, unsigned n) {
  return n >= 32 ? 0xFFFFFFFFu : ((1u << n) - 1u) << first;
}

// v[0..n) of one logical warp, with the lanes that did not take part poisoned and reported.
template <class T>
__KP_INLINE void check_lanes(T* v, unsigned n, uint32_t got, unsigned first, const char* what,
                             site s, unsigned tid_of_first) {
  for (unsigned i = 0; i < n; i++)
    if (!((got >> (first + i)) & 1u)) {
      if (__kp_cur->lane == first) missing_lane(what, s.line, tid_of_first + i);
      v[i] = poison<T>();
    }
}

// Reduction of v[0..valid) as a shuffle-down tree does it: offsets 1, 2, 4, ... below `width`,
// element i taking in i + offset while that is below `valid`. Returns element 0.
template <class T, class Op>
__KP_INLINE T tree_reduce(T* v, int width, int valid, Op& op) {
  for (int off = 1; off < width; off <<= 1)
    for (int i = 0; i + off < valid; i += 2 * off) v[i] = op(v[i], v[i + off]);
  return v[0];
}

// Inclusive scan of v[0..n) in place as a shuffle-up (Kogge-Stone) scan does it: at offsets 1, 2,
// 4, ..., v[i] = op(v[i - offset], v[i]).
template <class T, class Op>
__KP_INLINE void tree_scan(T* v, int n, Op& op) {
  for (int off = 1; off < n; off <<= 1)
    for (int i = n - 1; i >= off; i--) v[i] = op(v[i - off], v[i]);
}

// One thread's reduction of v[0..n): a pairwise tree for cub::Sum, left to right for any other
// operator (the orders CUB 3.0 took on an H200; docs/fidelity.md). Overwrites v.
template <class T, class Op>
__KP_INLINE T reduce_run(T* v, int n, Op& op) {
  if constexpr (__is_same(Op, ::cub::Sum)) return tree_reduce(v, n, n, op);
  T acc = v[0];
  for (int i = 1; i < n; i++) acc = op(acc, v[i]);
  return acc;
}
template <int N, class T, class Op>
__KP_INLINE T thread_reduce(const T (&in)[N], Op& op) {
  T v[N];
  for (int i = 0; i < N; i++) v[i] = in[i];
  return reduce_run(v, N, op);
}

// Sequential per-thread scans (CUB's thread-level helpers).
template <int N, class T, class Op>
__KP_INLINE void thread_scan_inclusive(const T (&in)[N], T (&out)[N], Op& op, T prefix,
                                       bool apply) {
  T acc = apply ? op(prefix, in[0]) : in[0];
  out[0] = acc;
  for (int i = 1; i < N; i++) out[i] = acc = op(acc, in[i]);
}
template <int N, class T, class Op>
__KP_INLINE void thread_scan_exclusive(const T (&in)[N], T (&out)[N], Op& op, T prefix,
                                       bool apply) {
  T acc = apply ? op(prefix, in[0]) : in[0];
  out[0] = prefix;
  for (int i = 1; i < N; i++) {
    T next = in[i];
    out[i] = acc;
    acc = op(acc, next);
  }
}

}  // namespace __kp
}  // namespace cub
