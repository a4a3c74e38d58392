// CUDA integer intrinsics, bit casts, cache-hinted loads/stores and CUDA's min/max overloads.
// Semantics follow the CUDA Math API / PTX (bit fields, funnel shifts, byte permute, dp4a).
#pragma once
#pragma clang system_header
#include <kport/rt.h>
#include <kport/cuda/vector_types.h>

// ---- Bit counting -------------------------------------------------------------------------------
__KP_INLINE int __popc(unsigned int x) { return __builtin_popcount(x); }
__KP_INLINE int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
__KP_INLINE int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
__KP_INLINE int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
__KP_INLINE int __ffs(int x) { return __builtin_ffs(x); }
__KP_INLINE int __ffsll(long long x) { return __builtin_ffsll(x); }
__KP_INLINE unsigned int __brev(unsigned int x) { return __builtin_bitreverse32(x); }
__KP_INLINE unsigned long long __brevll(unsigned long long x) { return __builtin_bitreverse64(x); }
// PTX fns: the offset-th set bit of mask counting from base (forward for offset > 0, backward for
// < 0; offset 0 tests base itself), 0xFFFFFFFF when there is none.
__KP_INLINE unsigned int __fns(unsigned int mask, unsigned int base, int offset) {
  if (offset == 0) return (base < 32 && (mask >> base & 1u)) ? base : 0xFFFFFFFFu;
  int step = offset > 0 ? 1 : -1, n = offset > 0 ? offset : -offset;
  for (int b = (int)base; b >= 0 && b < 32; b += step)
    if ((mask >> b & 1u) && --n == 0) return (unsigned)b;
  return 0xFFFFFFFFu;
}

// ---- Byte permute, funnel shifts ------------------------------------------------------------
// PTX prmt default mode: selector nibble bits 0-2 pick one of the 8 bytes of {y,x}; bit 3
// replicates that byte's sign bit instead (the Math API docs only describe bits 0-2).
__KP_INLINE unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  unsigned long long src = ((unsigned long long)y << 32) | x;
  unsigned int r = 0;
  for (int i = 0; i < 4; ++i) {
    unsigned sel = (s >> (4 * i)) & 0xFu;
    unsigned byte = (unsigned)(src >> (8 * (sel & 7u))) & 0xFFu;
    if (sel & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * i);
  }
  return r;
}
__KP_INLINE unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)((v << (shift & 31u)) >> 32);
}
__KP_INLINE unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)((v << (shift < 32u ? shift : 32u)) >> 32);
}
__KP_INLINE unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)(v >> (shift & 31u));
}
__KP_INLINE unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)(v >> (shift < 32u ? shift : 32u));
}

// ---- Multiplies, averages, sums of absolute differences -----------------------------------------
__KP_INLINE int __mulhi(int x, int y) { return (int)(((long long)x * y) >> 32); }
__KP_INLINE unsigned int __umulhi(unsigned int x, unsigned int y) {
  return (unsigned int)(((unsigned long long)x * y) >> 32);
}
__KP_INLINE long long __mul64hi(long long x, long long y) {
  return (long long)(((__int128)x * y) >> 64);
}
__KP_INLINE unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return (unsigned long long)(((unsigned __int128)x * y) >> 64);
}
// Only the low 24 bits of each operand take part (sign-extended for __mul24).
__KP_INLINE int __mul24(int x, int y) {
  int a = (int)((unsigned)x << 8) >> 8, b = (int)((unsigned)y << 8) >> 8;
  return (int)((long long)a * b);
}
__KP_INLINE unsigned int __umul24(unsigned int x, unsigned int y) {
  return (x & 0xFFFFFFu) * (y & 0xFFFFFFu);
}
__KP_INLINE int __hadd(int x, int y) { return (int)(((long long)x + y) >> 1); }
__KP_INLINE int __rhadd(int x, int y) { return (int)(((long long)x + y + 1) >> 1); }
__KP_INLINE unsigned int __uhadd(unsigned int x, unsigned int y) {
  return (unsigned int)(((unsigned long long)x + y) >> 1);
}
__KP_INLINE unsigned int __urhadd(unsigned int x, unsigned int y) {
  return (unsigned int)(((unsigned long long)x + y + 1) >> 1);
}
__KP_INLINE unsigned int __sad(int x, int y, unsigned int z) {
  return z + (unsigned int)(x > y ? (long long)x - y : (long long)y - x);
}
__KP_INLINE unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) {
  return z + (x > y ? x - y : y - x);
}

// ---- Dot products of packed bytes / halfwords (PTX dp4a, dp2a) ----------------------------------
__KP_INLINE int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i)
    c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return c;
}
__KP_INLINE unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
  for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xFFu) * ((b >> (8 * i)) & 0xFFu);
  return c;
}
__KP_INLINE int __dp4a(char4 a, char4 b, int c) {
  return c + a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
__KP_INLINE unsigned int __dp4a(uchar4 a, uchar4 b, unsigned int c) {
  return c + a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
// a holds two 16-bit values, b four bytes; _lo uses bytes 0-1 of b, _hi bytes 2-3.
__KP_INLINE int __dp2a_lo(int a, int b, int c) {
  return c + (short)a * (signed char)b + (short)(a >> 16) * (signed char)(b >> 8);
}
__KP_INLINE int __dp2a_hi(int a, int b, int c) {
  return c + (short)a * (signed char)(b >> 16) + (short)(a >> 16) * (signed char)(b >> 24);
}
__KP_INLINE unsigned int __dp2a_lo(unsigned int a, unsigned int b, unsigned int c) {
  return c + (a & 0xFFFFu) * (b & 0xFFu) + (a >> 16) * ((b >> 8) & 0xFFu);
}
__KP_INLINE unsigned int __dp2a_hi(unsigned int a, unsigned int b, unsigned int c) {
  return c + (a & 0xFFFFu) * ((b >> 16) & 0xFFu) + (a >> 16) * (b >> 24);
}

// ---- SIMD-within-a-word video intrinsics (the common ones) -------------------------------------
namespace __kp_cuda {
// Apply op to each of the N-bit lanes of a and b (as signed when S).
template <int N, bool S, class Op>
__KP_INLINE unsigned int simd_lanes(unsigned int a, unsigned int b, Op op) {
  unsigned int r = 0, m = (1u << N) - 1;
  for (int i = 0; i < 32; i += N) {
    int x = (int)((a >> i) & m), y = (int)((b >> i) & m);
    if (S) {
      x = (x ^ (1 << (N - 1))) - (1 << (N - 1));
      y = (y ^ (1 << (N - 1))) - (1 << (N - 1));
    }
    r |= ((unsigned int)op(x, y) & m) << i;
  }
  return r;
}
template <int N, bool S>
__KP_INLINE int sat_lane(int v) {
  int lo = S ? -(1 << (N - 1)) : 0, hi = S ? (1 << (N - 1)) - 1 : (1 << N) - 1;
  return v < lo ? lo : v > hi ? hi : v;
}
}  // namespace __kp_cuda
#define __KP_SIMD(NAME, N, S, EXPR)                                                                  \
  __KP_INLINE unsigned int NAME(unsigned int a, unsigned int b) {                                    \
    return __kp_cuda::simd_lanes<N, S>(a, b, [](int x, int y) { return EXPR; });                     \
  }
__KP_SIMD(__vadd2, 16, false, x + y)
__KP_SIMD(__vadd4, 8, false, x + y)
__KP_SIMD(__vsub2, 16, false, x - y)
__KP_SIMD(__vsub4, 8, false, x - y)
__KP_SIMD(__vaddss2, 16, true, (__kp_cuda::sat_lane<16, true>(x + y)))
__KP_SIMD(__vaddss4, 8, true, (__kp_cuda::sat_lane<8, true>(x + y)))
__KP_SIMD(__vaddus2, 16, false, (__kp_cuda::sat_lane<16, false>(x + y)))
__KP_SIMD(__vaddus4, 8, false, (__kp_cuda::sat_lane<8, false>(x + y)))
__KP_SIMD(__vsubss2, 16, true, (__kp_cuda::sat_lane<16, true>(x - y)))
__KP_SIMD(__vsubss4, 8, true, (__kp_cuda::sat_lane<8, true>(x - y)))
__KP_SIMD(__vsubus2, 16, false, (__kp_cuda::sat_lane<16, false>(x - y)))
__KP_SIMD(__vsubus4, 8, false, (__kp_cuda::sat_lane<8, false>(x - y)))
__KP_SIMD(__vabsdiffs2, 16, true, x > y ? x - y : y - x)
__KP_SIMD(__vabsdiffs4, 8, true, x > y ? x - y : y - x)
__KP_SIMD(__vabsdiffu2, 16, false, x > y ? x - y : y - x)
__KP_SIMD(__vabsdiffu4, 8, false, x > y ? x - y : y - x)
__KP_SIMD(__vavgu2, 16, false, (x + y + 1) >> 1)
__KP_SIMD(__vavgu4, 8, false, (x + y + 1) >> 1)
__KP_SIMD(__vmaxs2, 16, true, x > y ? x : y)
__KP_SIMD(__vmaxs4, 8, true, x > y ? x : y)
__KP_SIMD(__vmaxu2, 16, false, x > y ? x : y)
__KP_SIMD(__vmaxu4, 8, false, x > y ? x : y)
__KP_SIMD(__vmins2, 16, true, x < y ? x : y)
__KP_SIMD(__vmins4, 8, true, x < y ? x : y)
__KP_SIMD(__vminu2, 16, false, x < y ? x : y)
__KP_SIMD(__vminu4, 8, false, x < y ? x : y)
__KP_SIMD(__vcmpeq2, 16, false, x == y ? -1 : 0)
__KP_SIMD(__vcmpeq4, 8, false, x == y ? -1 : 0)
__KP_SIMD(__vcmpne2, 16, false, x != y ? -1 : 0)
__KP_SIMD(__vcmpne4, 8, false, x != y ? -1 : 0)
__KP_SIMD(__vcmpges4, 8, true, x >= y ? -1 : 0)
__KP_SIMD(__vcmpgeu4, 8, false, x >= y ? -1 : 0)
__KP_SIMD(__vcmpgts4, 8, true, x > y ? -1 : 0)
__KP_SIMD(__vcmpgtu4, 8, false, x > y ? -1 : 0)
__KP_SIMD(__vcmplts4, 8, true, x < y ? -1 : 0)
__KP_SIMD(__vcmpltu4, 8, false, x < y ? -1 : 0)
#undef __KP_SIMD
__KP_INLINE unsigned int __vabs4(unsigned int a) {
  return __kp_cuda::simd_lanes<8, true>(a, 0, [](int x, int) { return x < 0 ? -x : x; });
}
__KP_INLINE unsigned int __vsads4(unsigned int a, unsigned int b) {
  unsigned d = __vabsdiffs4(a, b);
  return (d & 0xFFu) + ((d >> 8) & 0xFFu) + ((d >> 16) & 0xFFu) + (d >> 24);
}
__KP_INLINE unsigned int __vsadu4(unsigned int a, unsigned int b) {
  unsigned d = __vabsdiffu4(a, b);
  return (d & 0xFFu) + ((d >> 8) & 0xFFu) + ((d >> 16) & 0xFFu) + (d >> 24);
}

// ---- Bit casts ----------------------------------------------------------------------------------
__KP_INLINE float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
__KP_INLINE int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
__KP_INLINE float __uint_as_float(unsigned int x) { return __builtin_bit_cast(float, x); }
__KP_INLINE unsigned int __float_as_uint(float x) { return __builtin_bit_cast(unsigned int, x); }
__KP_INLINE long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
__KP_INLINE double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
__KP_INLINE int __double2hiint(double x) { return (int)(__double_as_longlong(x) >> 32); }
__KP_INLINE int __double2loint(double x) { return (int)__double_as_longlong(x); }
__KP_INLINE double __hiloint2double(int hi, int lo) {
  return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}

// ---- Cache-hinted loads and stores: plain memory accesses here --------------------------------
#define __KP_LOAD_HINT(NAME)                                                                         \
  template <class T>                                                                               \
  __KP_INLINE T NAME(const T* p) {                                                                   \
    return *p;                                                                                     \
  }
__KP_LOAD_HINT(__ldg)
__KP_LOAD_HINT(__ldcg)
__KP_LOAD_HINT(__ldca)
__KP_LOAD_HINT(__ldcs)
__KP_LOAD_HINT(__ldlu)
__KP_LOAD_HINT(__ldcv)
#undef __KP_LOAD_HINT
#define __KP_STORE_HINT(NAME)                                                                        \
  template <class T>                                                                               \
  __KP_INLINE void NAME(T* p, T v) {                                                                 \
    *p = v;                                                                                        \
  }
__KP_STORE_HINT(__stwb)
__KP_STORE_HINT(__stcg)
__KP_STORE_HINT(__stcs)
__KP_STORE_HINT(__stwt)
#undef __KP_STORE_HINT

// ---- CUDA's global min/max overloads (mixed signed/unsigned pairs compare as unsigned) --------
#define __KP_MINMAX(T1, T2, R)                                                                       \
  __KP_INLINE R min(const T1 a, const T2 b) { return (R)a < (R)b ? (R)a : (R)b; }                    \
  __KP_INLINE R max(const T1 a, const T2 b) { return (R)a > (R)b ? (R)a : (R)b; }
__KP_MINMAX(int, int, int)
__KP_MINMAX(unsigned int, unsigned int, unsigned int)
__KP_MINMAX(int, unsigned int, unsigned int)
__KP_MINMAX(unsigned int, int, unsigned int)
__KP_MINMAX(long, long, long)
__KP_MINMAX(unsigned long, unsigned long, unsigned long)
__KP_MINMAX(long, unsigned long, unsigned long)
__KP_MINMAX(unsigned long, long, unsigned long)
__KP_MINMAX(long long, long long, long long)
__KP_MINMAX(unsigned long long, unsigned long long, unsigned long long)
__KP_MINMAX(long long, unsigned long long, unsigned long long)
__KP_MINMAX(unsigned long long, long long, unsigned long long)
#undef __KP_MINMAX
// Floating min/max are fminf/fmax: a NaN operand yields the other one.
__KP_INLINE float min(const float a, const float b) { return __builtin_fminf(a, b); }
__KP_INLINE float max(const float a, const float b) { return __builtin_fmaxf(a, b); }
__KP_INLINE double min(const double a, const double b) { return __builtin_fmin(a, b); }
__KP_INLINE double max(const double a, const double b) { return __builtin_fmax(a, b); }
__KP_INLINE double min(const float a, const double b) { return __builtin_fmin(a, b); }
__KP_INLINE double max(const float a, const double b) { return __builtin_fmax(a, b); }
__KP_INLINE double min(const double a, const float b) { return __builtin_fmin(a, b); }
__KP_INLINE double max(const double a, const float b) { return __builtin_fmax(a, b); }
__KP_INLINE unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
__KP_INLINE unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
__KP_INLINE long long llmin(long long a, long long b) { return a < b ? a : b; }
__KP_INLINE long long llmax(long long a, long long b) { return a > b ? a : b; }
__KP_INLINE unsigned long long ullmin(unsigned long long a, unsigned long long b) {
  return a < b ? a : b;
}
__KP_INLINE unsigned long long ullmax(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}
