// Exact rounding helpers behind CUDA's conversions and directed-rounding intrinsics.
// GPU conversions round once; the host must avoid double rounding, so values travel either exactly
// or rounded-to-odd (which a later, narrower rounding cannot misround).
#pragma once
#pragma clang system_header
#include <kport/rt.h>

namespace __kp_cuda {

enum rmode { RN = 0, RZ = 1, RD = 2, RU = 3 };

// By reference: copying __half by value costs overload resolution over its many conversions.
template <class To, class From>
__KP_INLINE constexpr To bits(const From& v) {
  return __builtin_bit_cast(To, v);
}

template <class I>
inline constexpr bool is_signed_int = I(-1) < I(0);
template <class I>
inline constexpr I int_max = is_signed_int<I> ? I((1ull << (sizeof(I) * 8 - 1)) - 1) : I(~0ull);
template <class I>
inline constexpr I int_min = is_signed_int<I> ? I(-int_max<I> - 1) : I(0);

// PTX cvt to an integer: saturate to the destination range. `r` is already integral. NaN gives 0,
// except from an f64 source or into a 64-bit destination: then 1 << (bits - 1) (PTX ISA, cvt).
template <class I, bool SrcF64 = false>
__KP_INLINE I cvt_sat(double r) {
  constexpr double lim = (double)(1ull << (sizeof(I) * 8 - 1)) * (is_signed_int<I> ? 1.0 : 2.0);
  if (r != r) return (SrcF64 || sizeof(I) == 8) ? I(1ull << (sizeof(I) * 8 - 1)) : I(0);
  if (r >= lim) return int_max<I>;
  if (r <= (double)int_min<I>) return int_min<I>;
  return (I)r;
}

// Round a double to an integral double in mode m (the default environment is round-to-nearest).
__KP_INLINE double round_int(double x, int m) {
  switch (m) {
    case RZ:
      return __builtin_trunc(x);
    case RD:
      return __builtin_floor(x);
    case RU:
      return __builtin_ceil(x);
    default:
      return __builtin_rint(x);
  }
}

// Neighbouring floating-point values by bit steps (no libm call; handles zeros and infinities).
template <class F, class U>
__KP_INLINE F next_up(F f) {
  U u = bits<U>(f);
  const U sign = U(1) << (sizeof(U) * 8 - 1);
  if (f == F(0)) return bits<F>(U(1));
  return bits<F>((u & sign) ? U(u - 1) : U(u + 1));
}
template <class F, class U>
__KP_INLINE F next_down(F f) {
  return -next_up<F, U>(-f);
}

// Move f, the round-to-nearest result, one step if mode m needs it; cmp = sign(f - exact).
template <class F, class U>
__KP_INLINE F adjust(F f, int cmp, bool exact_negative, int m) {
  if (cmp == 0 || m == RN) return f;
  bool down = m == RD || (m == RZ && !exact_negative);
  if (down) return cmp > 0 ? next_down<F, U>(f) : f;
  return cmp < 0 ? next_up<F, U>(f) : f;
}

// Round the exact value hi + lo (hi = RN(exact) as a double, only the sign of lo matters) to
// float in mode m.
__KP_INLINE float f32_round(double hi, double lo, int m) {
  float f = (float)hi;
  if (hi != hi) return f;
  double fd = f;
  int cmp = fd > hi ? 1 : fd < hi ? -1 : (lo > 0 ? -1 : lo < 0 ? 1 : 0);
  return adjust<float, uint32_t>(f, cmp, __builtin_signbit(hi), m);
}
// Same for a double result: hi is already the nearest double.
__KP_INLINE double f64_round(double hi, double lo, int m) {
  if (hi != hi) return hi;
  return adjust<double, uint64_t>(hi, lo > 0 ? -1 : lo < 0 ? 1 : 0, __builtin_signbit(hi), m);
}

// Error-free sum: s + e == a + b exactly.
__KP_INLINE double two_sum(double a, double b, double* e) {
  double s = a + b, bb = s - a;
  *e = (a - (s - bb)) + (b - bb);
  return s;
}

// Make hi (nearest to hi + lo) round-to-odd: a later rounding to <= 51 bits is then correct.
__KP_INLINE double f64_odd(double hi, double lo) {
  if (lo == 0 || hi != hi || (bits<uint64_t>(hi) & 1)) return hi;
  return lo > 0 ? next_up<double, uint64_t>(hi) : next_down<double, uint64_t>(hi);
}

// double -> float rounded to odd (sticky), so a following rounding to 16 bits is exact-once.
__KP_INLINE float f32_odd(double x) {
  float f = (float)x;
  double fd = f;
  if (fd == x || x != x || (bits<uint32_t>(f) & 1)) return f;
  return fd < x ? next_up<float, uint32_t>(f) : next_down<float, uint32_t>(f);
}

// The remainder x - (double)x of a 64-bit integer, exactly, as a double (|it| < 2^11). Written
// without __int128 <-> double conversions: kernels link against no compiler runtime, which
// those (__fixdfti, __floattidf) would need.
__KP_INLINE double i64_rest(long long x, double hi) {
  if (hi >= 0x1p63) return (double)(x - 0x7fffffffffffffffLL) - 1.0;  // hi is 2^63: x - 2^63
  return (double)(x - (long long)hi);
}
__KP_INLINE double u64_rest(unsigned long long x, double hi) {
  if (hi >= 0x1p64) return -(double)(~x) - 1.0;  // hi is 2^64: x - 2^64 = -(~x) - 1
  unsigned long long h = (unsigned long long)hi;
  return x >= h ? (double)(x - h) : -(double)(h - x);
}

// 64-bit integer -> double rounded to odd (exact below 2^53).
__KP_INLINE double i64_odd(long long v) {
  double hi = (double)v;
  return f64_odd(hi, i64_rest(v, hi));
}
__KP_INLINE double u64_odd(unsigned long long v) {
  double hi = (double)v;
  return f64_odd(hi, u64_rest(v, hi));
}

// Results of the basic float operations in mode m. RN is the plain float operation: going through
// double would round twice.
__KP_INLINE float fadd_dir(float a, float b, int m) {
  if (m == RN) return a + b;
  double e, s = two_sum(a, b, &e);
  return f32_round(s, e, m);
}
__KP_INLINE float fmul_dir(float a, float b, int m) {
  return m == RN ? a * b : f32_round((double)a * b, 0, m);
}
__KP_INLINE float fdiv_dir(float a, float b, int m) {
  if (m == RN) return a / b;
  double q = (double)a / b, r = __builtin_fma(-q, (double)b, (double)a);
  return f32_round(q, b > 0 ? r : -r, m);  // sign(exact - q) = sign(r / b)
}
__KP_INLINE float fsqrt_dir(float a, int m) {
  if (m == RN) return __builtin_sqrtf(a);
  double s = __builtin_sqrt((double)a);
  return f32_round(s, __builtin_fma(-s, s, (double)a), m);
}
__KP_INLINE float ffma_dir(float a, float b, float c, int m) {
  if (m == RN) return __builtin_fmaf(a, b, c);
  double e, s = two_sum((double)a * b, c, &e);
  return f32_round(s, e, m);
}
// Double operations: the residual's sign comes from exact binary128 arithmetic (a product of two
// doubles is exact there, with no underflow), so subnormal and overflowing results are right too.
typedef __float128 quad;
__KP_INLINE double f64_round_q(double hi, quad resid, int m) {  // resid: sign of (exact - hi)
  if (hi != hi) return hi;
  return adjust<double, uint64_t>(hi, resid > 0 ? -1 : resid < 0 ? 1 : 0, __builtin_signbit(hi), m);
}
// An infinite result from finite operands overflowed: the exact value is nearer zero.
__KP_INLINE double f64_overflowed(double hi, int m) {
  return adjust<double, uint64_t>(hi, hi > 0 ? 1 : -1, hi < 0, m);
}
__KP_INLINE double dadd_dir(double a, double b, int m) {
  double e, s = two_sum(a, b, &e);
  if (__builtin_isinf(s) && !__builtin_isinf(a) && !__builtin_isinf(b)) return f64_overflowed(s, m);
  return f64_round(s, e, m);
}
__KP_INLINE double dmul_dir(double a, double b, int m) {
  double p = a * b;
  if (__builtin_isinf(p) && !__builtin_isinf(a) && !__builtin_isinf(b)) return f64_overflowed(p, m);
  return f64_round_q(p, (quad)a * b - (quad)p, m);
}
__KP_INLINE double ddiv_dir(double a, double b, int m) {
  double q = a / b;
  if (__builtin_isinf(q) && !__builtin_isinf(a) && b != 0) return f64_overflowed(q, m);
  if (b == 0 || __builtin_isinf(q) || __builtin_isinf(b)) return q;
  quad r = (quad)a - (quad)q * b;  // sign(exact - q) = sign(r / b)
  return f64_round_q(q, b > 0 ? r : -r, m);
}
__KP_INLINE double dsqrt_dir(double a, int m) {
  double s = __builtin_sqrt(a);
  if (!(a > 0) || __builtin_isinf(a)) return s;
  return f64_round_q(s, (quad)a - (quad)s * s, m);
}
__KP_INLINE double dfma_dir(double a, double b, double c, int m) {
  double r = __builtin_fma(a, b, c);
  if (m == RN || r != r || __builtin_isinf(a) || __builtin_isinf(b) || __builtin_isinf(c)) return r;
  if (__builtin_isinf(r)) return f64_overflowed(r, m);
  // exact = p + c with p exact in binary128; TwoSum there gives exact = s + e.
  quad p = (quad)a * b, s = p + c, bb = s - p, e = (p - (s - bb)) + ((quad)c - bb);
  quad d = (quad)r - s;  // sign(r - exact) = sign(d - e), d and e tiny relative to s
  quad cmp = d - e;
  return adjust<double, uint64_t>(r, cmp > 0 ? 1 : cmp < 0 ? -1 : 0, __builtin_signbit(r), m);
}

// ---- 16-bit float formats ------------------------------------------------------------------
// Canonical NaN that PTX cvt/arith produce for f16 and bf16 (unconfirmed for arithmetic results).
inline constexpr uint16_t NAN16 = 0x7FFF;

struct fmt_half {
  static __KP_INLINE uint16_t rn(float f) { return f != f ? NAN16 : bits<uint16_t>((_Float16)f); }
  static __KP_INLINE constexpr float to_float(uint16_t h) { return (float)bits<_Float16>(h); }
  // __half2float gives the canonical NaN, as CUDA's host path does (unconfirmed on the device).
  static __KP_INLINE constexpr float to_float_canon(uint16_t h) {
    return (h & 0x7FFFu) > 0x7C00u ? bits<float>(0x7FFFFFFFu) : to_float(h);
  }
};
struct fmt_bf16 {
  static __KP_INLINE constexpr uint16_t rn(float f) {
    uint32_t u = bits<uint32_t>(f);
    if (f != f) return NAN16;
    return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
  static __KP_INLINE constexpr float to_float(uint16_t h) { return bits<float>(uint32_t(h) << 16); }
};

// Step a 16-bit float one representable value up or down (sign-magnitude bit steps).
__KP_INLINE uint16_t step16(uint16_t h, bool up) {
  uint16_t sign = h & 0x8000u, mag = h & 0x7FFFu;
  if (mag == 0) return up ? 0x0001 : 0x8001;
  return (up == !sign) ? uint16_t(h + 1) : uint16_t(h - 1);
}

// Round x (exact, or already rounded to odd at >= 13 extra bits) to a 16-bit format in mode m.
template <class Fmt>
__KP_INLINE uint16_t to16(double x, int m) {
  uint16_t h = Fmt::rn(f32_odd(x));
  if (m == RN || x != x) return h;
  double back = Fmt::to_float(h);
  if (back == x) return h;
  bool neg = x < 0;
  bool down = m == RD || (m == RZ && !neg);
  if (down) return back > x ? step16(h, false) : h;
  return back < x ? step16(h, true) : h;
}

// fma rounded once to a 16-bit format: the product is exact in double, the sum goes through
// round-to-odd.
template <class Fmt>
__KP_INLINE uint16_t fma16(float a, float b, float c, int m) {
  double e, s = two_sum((double)a * b, (double)c, &e);
  return to16<Fmt>(f64_odd(s, e), m);
}

}  // namespace __kp_cuda

namespace __kp_cuda {
// Integer -> 16-bit float in mode m; 64-bit sources go through round-to-odd.
template <class Fmt, class I>
__KP_INLINE uint16_t int_to16(I v, int m) {
  if constexpr (sizeof(I) < 8)
    return to16<Fmt>((double)v, m);
  else if constexpr (is_signed_int<I>)
    return to16<Fmt>(i64_odd((long long)v), m);
  else
    return to16<Fmt>(u64_odd((unsigned long long)v), m);
}
// 16-bit float -> integer in mode m with PTX saturation.
template <class I, class Fmt>
__KP_INLINE I f16_to_int(uint16_t h, int m) {
  return cvt_sat<I>(round_int(Fmt::to_float(h), m));
}
}  // namespace __kp_cuda
