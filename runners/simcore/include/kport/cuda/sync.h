// CUDA block barriers and warp-level primitives (__syncthreads*, __syncwarp, __shfl*_sync, votes,
// __reduce_*_sync, __match_*_sync) on the runtime's rendezvous calls.
// Every entry point takes defaulted (line, column) parameters: they default to the call site, so
// the runtime can tell which lanes meet at the same barrier or collective.
// Shuffles follow PTX shfl.sync exactly (source lane within the width-sized segment; up/down/xor
// keep the own value when the source is outside it). Reading a lane outside the member mask, or one
// that did not take part, returns a poison value and reports KP_F_INVALID.
#pragma once
#pragma clang system_header
#include <stdio.h>
#include <kport/rt.h>
#include <kport/cuda/bf16.h>
#include <kport/cuda/fp16.h>

#define KP_SITE unsigned kp_line = __builtin_LINE(), unsigned kp_col = __builtin_COLUMN()

// ---- Block barriers -----------------------------------------------------------------------------
KP_INLINE void __syncthreads(KP_SITE) { kp_barrier(kp_line, kp_col, 0, 0); }
KP_INLINE int __syncthreads_count(int pred, KP_SITE) {
  return kp_barrier(kp_line, kp_col, pred, 1);
}
KP_INLINE int __syncthreads_and(int pred, KP_SITE) { return kp_barrier(kp_line, kp_col, pred, 2); }
KP_INLINE int __syncthreads_or(int pred, KP_SITE) { return kp_barrier(kp_line, kp_col, pred, 3); }

namespace kp_cuda {

// Recognisable poison: quiet NaNs with a 0xBE payload for floating types, 0xBE bytes otherwise.
template <class T>
KP_INLINE T poison() {
  T v;
  __builtin_memset(&v, 0xBE, sizeof v);
  return v;
}
template <>
KP_INLINE float poison<float>() {
  return bits<float>(0x7FFEBEBEu);
}
template <>
KP_INLINE double poison<double>() {
  return bits<double>(0x7FFEBEBEBEBEBEBEull);
}
template <>
KP_INLINE __half poison<__half>() {
  return __ushort_as_half(0x7EBE);
}
template <>
KP_INLINE __half2 poison<__half2>() {
  return __half2half2(poison<__half>());
}
template <>
KP_INLINE __nv_bfloat16 poison<__nv_bfloat16>() {
  return __ushort_as_bfloat16(0x7FFE);
}
template <>
KP_INLINE __nv_bfloat162 poison<__nv_bfloat162>() {
  return __bfloat162bfloat162(poison<__nv_bfloat16>());
}

[[gnu::cold, gnu::noinline]] inline void lane_fault(const char* fn, unsigned line, unsigned lane,
                                                    unsigned src, uint32_t mask, uint32_t got) {
  char msg[200];
  if (!((mask >> lane) & 1u))
    snprintf(msg, sizeof msg, "%s: calling lane %u is not in its member mask 0x%08x", fn, lane,
             mask);
  else if (!((mask >> src) & 1u))
    snprintf(msg, sizeof msg,
             "%s: lane %u reads lane %u, outside the member mask 0x%08x "
             "(result undefined; poisoned)",
             fn, lane, src, mask);
  else
    snprintf(msg, sizeof msg,
             "%s: lane %u reads lane %u, which did not take part (lanes 0x%08x "
             "did; result poisoned)",
             fn, lane, src, got & mask);
  kp_report(KP_F_INVALID, line, msg);
}
[[gnu::cold, gnu::noinline]] inline void bad_width(const char* fn, unsigned line, int width) {
  char msg[160];
  snprintf(msg, sizeof msg,
           "%s: width %d is not a power of two in 1..32 (undefined in CUDA; "
           "emulating the PTX segment arithmetic)",
           fn, width);
  kp_report(KP_F_INVALID, line, msg);
}
[[gnu::cold, gnu::noinline]] inline void not_member(const char* fn, unsigned line, uint32_t mask) {
  char msg[120];
  snprintf(msg, sizeof msg, "%s: calling lane %u is not in the member mask 0x%08x", fn,
           kp_cur->lane, mask);
  kp_report(KP_F_INVALID, line, msg);
}

// Rendezvous of this lane's value with its warp; returns the lanes that took part.
KP_INLINE uint32_t warp_sync(const char* fn, const void* v, unsigned size, uint32_t mask,
                             unsigned line, unsigned col, const unsigned char** snap) {
  uint32_t got = (uint32_t)kp_simd_sync(v, size, line, col, mask, snap);
  if (__builtin_expect(mask && !((mask >> kp_cur->lane) & 1u), 0)) not_member(fn, line, mask);
  return got;
}
template <class T>
KP_INLINE T lane_value(const unsigned char* snap, unsigned lane) {
  T r;
  __builtin_memcpy(&r, snap + lane * KP_SLOT_BYTES, sizeof(T));
  return r;
}

enum shfl_mode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_BFLY };

// PTX shfl source lane. b: lane or offset operand (5 bits used); c: CUDA's packed operand
// ((32 - width) << 8 | clamp). A source outside [minLane, maxLane] means "read your own value".
KP_INLINE unsigned shfl_src(int mode, unsigned lane, unsigned b, unsigned c) {
  unsigned bval = b & 31u, cval = c & 31u, seg = (c >> 8) & 31u;
  int max_lane = (int)((lane & seg) | (cval & ~seg)), min_lane = (int)(lane & seg), j;
  bool in;
  switch (mode) {
    case SHFL_UP:
      j = (int)lane - (int)bval;
      in = j >= max_lane;
      break;
    case SHFL_DOWN:
      j = (int)(lane + bval);
      in = j <= max_lane;
      break;
    case SHFL_BFLY:
      j = (int)(lane ^ bval);
      in = j <= max_lane;
      break;
    default:
      j = min_lane | (int)(bval & ~seg);
      in = j <= max_lane;
      break;
  }
  return in ? (unsigned)j : lane;
}

template <class T>
KP_INLINE T shfl(const char* fn, uint32_t mask, const T& v, int mode, unsigned b, int width,
                 unsigned line, unsigned col) {
  const unsigned char* snap;
  uint32_t got = (uint32_t)kp_simd_sync(&v, sizeof(T), line, col, mask, &snap);
  unsigned lane = kp_cur->lane;
  if (__builtin_expect(width <= 0 || width > 32 || (width & (width - 1)), 0))
    bad_width(fn, line, width);
  unsigned c = ((unsigned)(32 - width) << 8) | (mode == SHFL_UP ? 0u : 31u);
  unsigned src = shfl_src(mode, lane, b, c);
  if (__builtin_expect(!((got & mask) >> src & 1u) || !((mask >> lane) & 1u), 0)) {
    lane_fault(fn, line, lane, src, mask, got);
    return poison<T>();
  }
  return src == lane ? v : lane_value<T>(snap, src);
}

// Fold op over the values of the lanes in mask that took part.
template <class T, class Op>
KP_INLINE T warp_fold(const char* fn, uint32_t mask, T v, Op op, unsigned line, unsigned col) {
  const unsigned char* snap;
  uint32_t m = warp_sync(fn, &v, sizeof v, mask, line, col, &snap) & mask;
  T acc = v;
  bool first = true;
  for (; m; m &= m - 1) {
    T x = lane_value<T>(snap, (unsigned)__builtin_ctz(m));
    acc = first ? x : op(acc, x);
    first = false;
  }
  return acc;
}
}  // namespace kp_cuda

// ---- Shuffles -----------------------------------------------------------------------------------
#define KP_SHFL(T)                                                                                 \
  KP_INLINE T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32, KP_SITE) {            \
    return kp_cuda::shfl<T>("__shfl_sync", mask, var, kp_cuda::SHFL_IDX, (unsigned)srcLane, width, \
                            kp_line, kp_col);                                                      \
  }                                                                                                \
  KP_INLINE T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = 32, KP_SITE) {  \
    return kp_cuda::shfl<T>("__shfl_up_sync", mask, var, kp_cuda::SHFL_UP, delta, width, kp_line,  \
                            kp_col);                                                               \
  }                                                                                                \
  KP_INLINE T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = 32,           \
                               KP_SITE) {                                                          \
    return kp_cuda::shfl<T>("__shfl_down_sync", mask, var, kp_cuda::SHFL_DOWN, delta, width,       \
                            kp_line, kp_col);                                                      \
  }                                                                                                \
  KP_INLINE T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32, KP_SITE) {       \
    return kp_cuda::shfl<T>("__shfl_xor_sync", mask, var, kp_cuda::SHFL_BFLY, (unsigned)laneMask,  \
                            width, kp_line, kp_col);                                               \
  }
KP_SHFL(int)
KP_SHFL(unsigned int)
KP_SHFL(long)
KP_SHFL(unsigned long)
KP_SHFL(long long)
KP_SHFL(unsigned long long)
KP_SHFL(float)
KP_SHFL(double)
KP_SHFL(__half)
KP_SHFL(__half2)
KP_SHFL(__nv_bfloat16)
KP_SHFL(__nv_bfloat162)
#undef KP_SHFL

// ---- Votes, warp barrier ------------------------------------------------------------------------
KP_INLINE void __syncwarp(unsigned mask = 0xFFFFFFFFu, KP_SITE) {
  const unsigned char* snap;
  kp_cuda::warp_sync("__syncwarp", nullptr, 0, mask, kp_line, kp_col, &snap);
}
// The lanes currently executing together: those that reach this call in the same round.
KP_INLINE unsigned __activemask(KP_SITE) {
  const unsigned char* snap;
  return (unsigned)kp_simd_sync(nullptr, 0, kp_line, kp_col, 0, &snap);
}
KP_INLINE unsigned __ballot_sync(unsigned mask, int pred, KP_SITE) {
  const unsigned char* snap;
  int p = pred != 0;
  uint32_t m = kp_cuda::warp_sync("__ballot_sync", &p, sizeof p, mask, kp_line, kp_col, &snap);
  unsigned r = 0;
  for (m &= mask; m; m &= m - 1) {
    unsigned l = (unsigned)__builtin_ctz(m);
    if (kp_cuda::lane_value<int>(snap, l)) r |= 1u << l;
  }
  return r;
}
KP_INLINE int __any_sync(unsigned mask, int pred, KP_SITE) {
  return __ballot_sync(mask, pred, kp_line, kp_col) != 0;
}
KP_INLINE int __all_sync(unsigned mask, int pred, KP_SITE) {
  const unsigned char* snap;
  int p = pred != 0;
  uint32_t m = kp_cuda::warp_sync("__all_sync", &p, sizeof p, mask, kp_line, kp_col, &snap);
  for (m &= mask; m; m &= m - 1)
    if (!kp_cuda::lane_value<int>(snap, (unsigned)__builtin_ctz(m))) return 0;
  return 1;
}

// ---- Warp reductions (sm_80) --------------------------------------------------------------------
#define KP_WREDUCE(NAME, T, EXPR)                                                                  \
  KP_INLINE T NAME(unsigned mask, T value, KP_SITE) {                                              \
    return kp_cuda::warp_fold(#NAME, mask, value, [](T a, T b) { return EXPR; }, kp_line, kp_col); \
  }
KP_WREDUCE(__reduce_add_sync, unsigned, a + b)
KP_WREDUCE(__reduce_add_sync, int, (int)((unsigned)a + (unsigned)b))
KP_WREDUCE(__reduce_min_sync, unsigned, a < b ? a : b)
KP_WREDUCE(__reduce_min_sync, int, a < b ? a : b)
KP_WREDUCE(__reduce_max_sync, unsigned, a > b ? a : b)
KP_WREDUCE(__reduce_max_sync, int, a > b ? a : b)
KP_WREDUCE(__reduce_and_sync, unsigned, a& b)
KP_WREDUCE(__reduce_or_sync, unsigned, a | b)
KP_WREDUCE(__reduce_xor_sync, unsigned, a ^ b)
#undef KP_WREDUCE

// ---- Match (sm_70): lanes of mask holding bitwise-equal values ----------------------------------
namespace kp_cuda {
template <class T>
KP_INLINE unsigned match_mask(const char* fn, unsigned mask, T v, unsigned line, unsigned col) {
  const unsigned char* snap;
  uint32_t m = warp_sync(fn, &v, sizeof v, mask, line, col, &snap) & mask;
  unsigned r = 0;
  for (; m; m &= m - 1) {
    unsigned l = (unsigned)__builtin_ctz(m);
    if (__builtin_memcmp(snap + l * KP_SLOT_BYTES, &v, sizeof v) == 0) r |= 1u << l;
  }
  return r;
}
}  // namespace kp_cuda
#define KP_MATCH(T)                                                                                \
  KP_INLINE unsigned __match_any_sync(unsigned mask, T value, KP_SITE) {                           \
    return kp_cuda::match_mask("__match_any_sync", mask, value, kp_line, kp_col);                  \
  }                                                                                                \
  KP_INLINE unsigned __match_all_sync(unsigned mask, T value, int* pred, KP_SITE) {                \
    unsigned same = kp_cuda::match_mask("__match_all_sync", mask, value, kp_line, kp_col);         \
    *pred = same == mask;                                                                          \
    return same == mask ? mask : 0u;                                                               \
  }
KP_MATCH(unsigned int)
KP_MATCH(int)
KP_MATCH(unsigned long)
KP_MATCH(long)
KP_MATCH(unsigned long long)
KP_MATCH(long long)
KP_MATCH(float)
KP_MATCH(double)
#undef KP_MATCH
