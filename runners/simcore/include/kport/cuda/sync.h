// CUDA block barriers and warp-level primitives (__syncthreads*, __syncwarp, __shfl*_sync, votes,
// __reduce_*_sync, __match_*_sync) on the runtime's rendezvous calls.
// Every entry point takes defaulted (line, column) parameters: they default to the call site, so
// the runtime can tell which lanes meet at the same barrier or collective.
// Shuffles follow PTX shfl.sync exactly (source lane within the width-sized segment; up/down/xor
// keep the own value when the source is outside it). Reading a lane outside the member mask, or one
// that did not take part, returns a poison value and reports __KP_F_INVALID.
#pragma once
#pragma clang system_header
#include <stdio.h>
#include <kport/rt.h>
#include <kport/cuda/bf16.h>
#include <kport/cuda/fp16.h>

#define __KP_SITE unsigned __kp_line = __builtin_LINE(), unsigned __kp_col = __builtin_COLUMN()
// A shuffle's or fold's body: one copy per operand type, not inlined at every call site, and not
// checked (it reads the runtime's lane slots and its own locals, never the kernel's memory):
// checked, its slot reads were most of a small warp-reduction kernel's compiled code. What it
// calls is always-inline, so that LLVM inlines it here (metal/report.h says why).
#define __KP_CUDA_COLLECTIVE __attribute__((noinline)) __KP_NOSAN

// ---- Block barriers -----------------------------------------------------------------------------
__KP_INLINE void __syncthreads(__KP_SITE) { __kp_barrier(__kp_line, __kp_col, 0, 0); }
__KP_INLINE int __syncthreads_count(int pred, __KP_SITE) {
  return __kp_barrier(__kp_line, __kp_col, pred, 1);
}
__KP_INLINE int __syncthreads_and(int pred, __KP_SITE) { return __kp_barrier(__kp_line, __kp_col, pred, 2); }
__KP_INLINE int __syncthreads_or(int pred, __KP_SITE) { return __kp_barrier(__kp_line, __kp_col, pred, 3); }

namespace __kp_cuda {

// Recognisable poison: quiet NaNs with a 0xBE payload for floating types, 0xBE bytes otherwise.
template <class T>
__KP_INLINE T poison() {
  T v;
  __builtin_memset(&v, 0xBE, sizeof v);
  return v;
}
template <>
__KP_INLINE float poison<float>() {
  return bits<float>(0x7FFEBEBEu);
}
template <>
__KP_INLINE double poison<double>() {
  return bits<double>(0x7FFEBEBEBEBEBEBEull);
}
template <>
__KP_INLINE __half poison<__half>() {
  return __ushort_as_half(0x7EBE);
}
template <>
__KP_INLINE __half2 poison<__half2>() {
  return __half2half2(poison<__half>());
}
template <>
__KP_INLINE __nv_bfloat16 poison<__nv_bfloat16>() {
  return __ushort_as_bfloat16(0x7FFE);
}
template <>
__KP_INLINE __nv_bfloat162 poison<__nv_bfloat162>() {
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
  __kp_report(__KP_F_INVALID, line, msg);
}
[[gnu::cold, gnu::noinline]] inline void bad_width(const char* fn, unsigned line, int width) {
  char msg[160];
  snprintf(msg, sizeof msg,
           "%s: width %d is not a power of two in 1..32 (undefined in CUDA; "
           "emulating the PTX segment arithmetic)",
           fn, width);
  __kp_report(__KP_F_INVALID, line, msg);
}
[[gnu::cold, gnu::noinline]] inline void not_member(const char* fn, unsigned line, uint32_t mask) {
  char msg[120];
  snprintf(msg, sizeof msg, "%s: calling lane %u is not in the member mask 0x%08x", fn,
           __kp_cur->lane, mask);
  __kp_report(__KP_F_INVALID, line, msg);
}

// Rendezvous of this lane's value with its warp; returns the lanes that took part.
__KP_INLINE uint32_t warp_sync(const char* fn, const void* v, unsigned size, uint32_t mask,
                             unsigned line, unsigned col, const unsigned char** snap) {
  uint32_t got = (uint32_t)__kp_simd_sync(v, size, line, col, mask, snap);
  if (__builtin_expect(mask && !((mask >> __kp_cur->lane) & 1u), 0)) not_member(fn, line, mask);
  return got;
}
template <class T>
__KP_INLINE T lane_value(const unsigned char* snap, unsigned lane) {
  T r;
  __builtin_memcpy(&r, snap + lane * __KP_SLOT_BYTES, sizeof(T));
  return r;
}

enum shfl_mode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_BFLY };

// PTX shfl source lane. b: lane or offset operand (5 bits used); c: CUDA's packed operand
// ((32 - width) << 8 | clamp). A source outside [minLane, maxLane] means "read your own value".
__KP_INLINE unsigned shfl_src(int mode, unsigned lane, unsigned b, unsigned c) {
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
__KP_CUDA_COLLECTIVE T shfl(const char* fn, uint32_t mask, const T& v, int mode, unsigned b, int width,
                 unsigned line, unsigned col) {
  const unsigned char* snap;
  uint32_t got = (uint32_t)__kp_simd_sync(&v, sizeof(T), line, col, mask, &snap);
  unsigned lane = __kp_cur->lane;
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
__KP_CUDA_COLLECTIVE T warp_fold(const char* fn, uint32_t mask, T v, Op op, unsigned line, unsigned col) {
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
}  // namespace __kp_cuda

// ---- Shuffles -----------------------------------------------------------------------------------
#define __KP_SHFL(T)                                                                                 \
  __KP_INLINE T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32, __KP_SITE) {            \
    return __kp_cuda::shfl<T>("__shfl_sync", mask, var, __kp_cuda::SHFL_IDX, (unsigned)srcLane, width, \
                            __kp_line, __kp_col);                                                      \
  }                                                                                                \
  __KP_INLINE T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = 32, __KP_SITE) {  \
    return __kp_cuda::shfl<T>("__shfl_up_sync", mask, var, __kp_cuda::SHFL_UP, delta, width, __kp_line,  \
                            __kp_col);                                                               \
  }                                                                                                \
  __KP_INLINE T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = 32,           \
                               __KP_SITE) {                                                          \
    return __kp_cuda::shfl<T>("__shfl_down_sync", mask, var, __kp_cuda::SHFL_DOWN, delta, width,       \
                            __kp_line, __kp_col);                                                      \
  }                                                                                                \
  __KP_INLINE T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32, __KP_SITE) {       \
    return __kp_cuda::shfl<T>("__shfl_xor_sync", mask, var, __kp_cuda::SHFL_BFLY, (unsigned)laneMask,  \
                            width, __kp_line, __kp_col);                                               \
  }
__KP_SHFL(int)
__KP_SHFL(unsigned int)
__KP_SHFL(long)
__KP_SHFL(unsigned long)
__KP_SHFL(long long)
__KP_SHFL(unsigned long long)
__KP_SHFL(float)
__KP_SHFL(double)
__KP_SHFL(__half)
__KP_SHFL(__half2)
__KP_SHFL(__nv_bfloat16)
__KP_SHFL(__nv_bfloat162)
#undef __KP_SHFL

// ---- Votes, warp barrier ------------------------------------------------------------------------
__KP_INLINE void __syncwarp(unsigned mask = 0xFFFFFFFFu, __KP_SITE) {
  const unsigned char* snap;
  __kp_cuda::warp_sync("__syncwarp", nullptr, 0, mask, __kp_line, __kp_col, &snap);
}
// The lanes currently executing together: those that reach this call in the same round.
__KP_INLINE unsigned __activemask(__KP_SITE) {
  const unsigned char* snap;
  return (unsigned)__kp_simd_sync(nullptr, 0, __kp_line, __kp_col, 0, &snap);
}
__KP_INLINE unsigned __ballot_sync(unsigned mask, int pred, __KP_SITE) {
  const unsigned char* snap;
  int p = pred != 0;
  uint32_t m = __kp_cuda::warp_sync("__ballot_sync", &p, sizeof p, mask, __kp_line, __kp_col, &snap);
  unsigned r = 0;
  for (m &= mask; m; m &= m - 1) {
    unsigned l = (unsigned)__builtin_ctz(m);
    if (__kp_cuda::lane_value<int>(snap, l)) r |= 1u << l;
  }
  return r;
}
__KP_INLINE int __any_sync(unsigned mask, int pred, __KP_SITE) {
  return __ballot_sync(mask, pred, __kp_line, __kp_col) != 0;
}
__KP_INLINE int __all_sync(unsigned mask, int pred, __KP_SITE) {
  const unsigned char* snap;
  int p = pred != 0;
  uint32_t m = __kp_cuda::warp_sync("__all_sync", &p, sizeof p, mask, __kp_line, __kp_col, &snap);
  for (m &= mask; m; m &= m - 1)
    if (!__kp_cuda::lane_value<int>(snap, (unsigned)__builtin_ctz(m))) return 0;
  return 1;
}

// ---- Warp reductions (sm_80) --------------------------------------------------------------------
#define __KP_WREDUCE(NAME, T, EXPR)                                                                  \
  __KP_INLINE T NAME(unsigned mask, T value, __KP_SITE) {                                              \
    return __kp_cuda::warp_fold(#NAME, mask, value, [](T a, T b) __attribute__((always_inline)) { return EXPR; }, __kp_line, __kp_col); \
  }
__KP_WREDUCE(__reduce_add_sync, unsigned, a + b)
__KP_WREDUCE(__reduce_add_sync, int, (int)((unsigned)a + (unsigned)b))
__KP_WREDUCE(__reduce_min_sync, unsigned, a < b ? a : b)
__KP_WREDUCE(__reduce_min_sync, int, a < b ? a : b)
__KP_WREDUCE(__reduce_max_sync, unsigned, a > b ? a : b)
__KP_WREDUCE(__reduce_max_sync, int, a > b ? a : b)
__KP_WREDUCE(__reduce_and_sync, unsigned, a& b)
__KP_WREDUCE(__reduce_or_sync, unsigned, a | b)
__KP_WREDUCE(__reduce_xor_sync, unsigned, a ^ b)
#undef __KP_WREDUCE

// ---- Match (sm_70): lanes of mask holding bitwise-equal values ----------------------------------
namespace __kp_cuda {
template <class T>
__KP_INLINE unsigned match_mask(const char* fn, unsigned mask, T v, unsigned line, unsigned col) {
  const unsigned char* snap;
  uint32_t m = warp_sync(fn, &v, sizeof v, mask, line, col, &snap) & mask;
  unsigned r = 0;
  for (; m; m &= m - 1) {
    unsigned l = (unsigned)__builtin_ctz(m);
    if (__builtin_memcmp(snap + l * __KP_SLOT_BYTES, &v, sizeof v) == 0) r |= 1u << l;
  }
  return r;
}
}  // namespace __kp_cuda
#define __KP_MATCH(T)                                                                                \
  __KP_INLINE unsigned __match_any_sync(unsigned mask, T value, __KP_SITE) {                           \
    return __kp_cuda::match_mask("__match_any_sync", mask, value, __kp_line, __kp_col);                  \
  }                                                                                                \
  __KP_INLINE unsigned __match_all_sync(unsigned mask, T value, int* pred, __KP_SITE) {                \
    unsigned same = __kp_cuda::match_mask("__match_all_sync", mask, value, __kp_line, __kp_col);         \
    *pred = same == mask;                                                                          \
    return same == mask ? mask : 0u;                                                               \
  }
__KP_MATCH(unsigned int)
__KP_MATCH(int)
__KP_MATCH(unsigned long)
__KP_MATCH(long)
__KP_MATCH(unsigned long long)
__KP_MATCH(long long)
__KP_MATCH(float)
__KP_MATCH(double)
#undef __KP_MATCH
