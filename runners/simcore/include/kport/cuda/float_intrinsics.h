// CUDA float/double intrinsics: fast-math forms, explicit rounding modes, conversions with PTX
// saturation, and the CUDA math functions that <math.h> lacks (rsqrtf, sinpif, erfinvf, ...).
#pragma once
#pragma clang system_header
#include <kport/rt.h>
#include <kport/cuda/rounding.h>

// ---- Fast-math intrinsics -----------------------------------------------------------------------
// The GPU evaluates these with approximate hardware units; libm is more accurate but keeps the
// special cases that follow from CUDA's documented formulas (e.g. __powf(-2, 2) is NaN).
__KP_INLINE float __expf(float x) { return __builtin_expf(x); }
__KP_INLINE float __exp10f(float x) { return __builtin_exp2f(x * 3.32192809488736234787f); }
__KP_INLINE float __logf(float x) { return __builtin_logf(x); }
__KP_INLINE float __log2f(float x) { return __builtin_log2f(x); }
__KP_INLINE float __log10f(float x) { return __builtin_log10f(x); }
__KP_INLINE float __sinf(float x) { return __builtin_sinf(x); }
__KP_INLINE float __cosf(float x) { return __builtin_cosf(x); }
__KP_INLINE float __tanf(float x) { return __builtin_sinf(x) / __builtin_cosf(x); }
__KP_INLINE void __sincosf(float x, float* s, float* c) {
  *s = __builtin_sinf(x);
  *c = __builtin_cosf(x);
}
__KP_INLINE float __powf(float x, float y) { return __builtin_exp2f(y * __builtin_log2f(x)); }
// Documented: 0 for 2^126 < |y| < 2^128 (NaN when x is infinite), else x / y.
// unconfirmed: the sign of that 0 (here the sign of x / y).
__KP_INLINE float __fdividef(float x, float y) {
  float ay = __builtin_fabsf(y);
  if (ay > 0x1p126f && ay < __builtin_huge_valf())
    return __builtin_isinf(x) ? __builtin_nanf("") : 0.0f * x * y;
  return x / y;
}
__KP_INLINE float fdividef(float x, float y) { return x / y; }
__KP_INLINE float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
__KP_INLINE float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }
__KP_INLINE double rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }
// unconfirmed: correctly rounded except where the double result lies within 2^-53 of a tie.
__KP_INLINE float __frsqrt_rn(float x) { return (float)(1.0 / __builtin_sqrt((double)x)); }

// ---- Explicit rounding modes: __fadd_rz, __dmul_ru, __float2int_rd, ... -------------------------
#define __KP_FOR_MODES(GEN)                                                                          \
  GEN(rn, __kp_cuda::RN)                                                                             \
  GEN(rz, __kp_cuda::RZ)                                                                             \
  GEN(rd, __kp_cuda::RD)                                                                             \
  GEN(ru, __kp_cuda::RU)

#define __KP_GEN(S, M)                                                                               \
  __KP_INLINE float __fadd_##S(float a, float b) { return __kp_cuda::fadd_dir(a, b, M); }              \
  __KP_INLINE float __fsub_##S(float a, float b) { return __kp_cuda::fadd_dir(a, -b, M); }             \
  __KP_INLINE float __fmul_##S(float a, float b) { return __kp_cuda::fmul_dir(a, b, M); }              \
  __KP_INLINE float __fdiv_##S(float a, float b) { return __kp_cuda::fdiv_dir(a, b, M); }              \
  __KP_INLINE float __frcp_##S(float a) { return __kp_cuda::fdiv_dir(1.0f, a, M); }                    \
  __KP_INLINE float __fsqrt_##S(float a) { return __kp_cuda::fsqrt_dir(a, M); }                        \
  __KP_INLINE float __fmaf_##S(float a, float b, float c) { return __kp_cuda::ffma_dir(a, b, c, M); }  \
  __KP_INLINE float __fmaf_ieee_##S(float a, float b, float c) {                                     \
    return __kp_cuda::ffma_dir(a, b, c, M);                                                          \
  }                                                                                                \
  __KP_INLINE double __dadd_##S(double a, double b) { return __kp_cuda::dadd_dir(a, b, M); }           \
  __KP_INLINE double __dsub_##S(double a, double b) { return __kp_cuda::dadd_dir(a, -b, M); }          \
  __KP_INLINE double __dmul_##S(double a, double b) { return __kp_cuda::dmul_dir(a, b, M); }           \
  __KP_INLINE double __ddiv_##S(double a, double b) { return __kp_cuda::ddiv_dir(a, b, M); }           \
  __KP_INLINE double __drcp_##S(double a) { return __kp_cuda::ddiv_dir(1.0, a, M); }                   \
  __KP_INLINE double __dsqrt_##S(double a) { return __kp_cuda::dsqrt_dir(a, M); }                      \
  __KP_INLINE double __fma_##S(double a, double b, double c) { return __kp_cuda::dfma_dir(a, b, c, M); }
__KP_FOR_MODES(__KP_GEN)
#undef __KP_GEN

// Float/double -> integer: PTX cvt.rXi saturates to the destination range (NaN: see cvt_sat).
#define __KP_CVT(SRC, SN, I, IN, S, M, F64)                                                          \
  __KP_INLINE I __##SN##2##IN##_##S(SRC x) {                                                         \
    return __kp_cuda::cvt_sat<I, F64>(__kp_cuda::round_int(x, M));                                     \
  }
#define __KP_GEN(S, M)                                                                               \
  __KP_CVT(float, float, int, int, S, M, false)                                                      \
  __KP_CVT(float, float, unsigned int, uint, S, M, false)                                            \
  __KP_CVT(float, float, long long, ll, S, M, false)                                                 \
  __KP_CVT(float, float, unsigned long long, ull, S, M, false)                                       \
  __KP_CVT(double, double, int, int, S, M, true)                                                     \
  __KP_CVT(double, double, unsigned int, uint, S, M, true)                                           \
  __KP_CVT(double, double, long long, ll, S, M, true)                                                \
  __KP_CVT(double, double, unsigned long long, ull, S, M, true)
__KP_FOR_MODES(__KP_GEN)
#undef __KP_GEN
#undef __KP_CVT

// Integer/double -> float and 64-bit integer -> double, in each rounding mode.
#define __KP_GEN(S, M)                                                                               \
  __KP_INLINE float __int2float_##S(int x) { return __kp_cuda::f32_round((double)x, 0, M); }           \
  __KP_INLINE float __uint2float_##S(unsigned int x) { return __kp_cuda::f32_round((double)x, 0, M); } \
  __KP_INLINE float __ll2float_##S(long long x) {                                                    \
    double hi = (double)x;                                                                         \
    return M == __kp_cuda::RN ? (float)x                                                             \
                            : __kp_cuda::f32_round(hi, __kp_cuda::i64_rest(x, hi), M);               \
  }                                                                                                \
  __KP_INLINE float __ull2float_##S(unsigned long long x) {                                          \
    double hi = (double)x;                                                                         \
    return M == __kp_cuda::RN ? (float)x                                                             \
                            : __kp_cuda::f32_round(hi, __kp_cuda::u64_rest(x, hi), M);               \
  }                                                                                                \
  __KP_INLINE double __ll2double_##S(long long x) {                                                  \
    double hi = (double)x;                                                                         \
    return __kp_cuda::f64_round(hi, __kp_cuda::i64_rest(x, hi), M);                                  \
  }                                                                                                \
  __KP_INLINE double __ull2double_##S(unsigned long long x) {                                        \
    double hi = (double)x;                                                                         \
    return __kp_cuda::f64_round(hi, __kp_cuda::u64_rest(x, hi), M);                                  \
  }                                                                                                \
  __KP_INLINE float __double2float_##S(double x) {                                                   \
    return M == __kp_cuda::RN ? (float)x : __kp_cuda::f32_round(x, 0, M);                              \
  }
__KP_FOR_MODES(__KP_GEN)
#undef __KP_GEN
#undef __KP_FOR_MODES
__KP_INLINE double __int2double_rn(int x) { return x; }
__KP_INLINE double __uint2double_rn(unsigned int x) { return x; }

// ---- CUDA math functions missing from <math.h> --------------------------------------------------
namespace __kp_cuda {
inline constexpr double kPi = 3.14159265358979323846, kSqrtPi = 1.77245385090551602730;
inline constexpr double kSqrt2 = 1.41421356237309504880;

// sin(pi x), cos(pi x), exact at integers and half-integers: reduce to [0, 1] by symmetry first
// (every reduction step below is exact).
__KP_INLINE double sinpi(double x) {
  if (__builtin_isinf(x)) return __builtin_nan("");
  double r = __builtin_remainder(x, 2.0), a = __builtin_fabs(r);
  if (a > 0.5) a = 1.0 - a;
  double v = a <= 0.25 ? __builtin_sin(kPi * a) : __builtin_cos(kPi * (0.5 - a));
  return __builtin_copysign(v, v == 0 ? x : r);
}
__KP_INLINE double cospi(double x) {
  if (__builtin_isinf(x)) return __builtin_nan("");
  double a = __builtin_fabs(__builtin_remainder(x, 2.0));
  if (a <= 0.25) return __builtin_cos(kPi * a);
  if (a <= 0.75) return __builtin_sin(kPi * (0.5 - a)) + 0.0;  // + 0.0: cospi(1/2) is +0
  return -__builtin_cos(kPi * (1.0 - a));
}

// Inverse error functions by Newton's method on libm's erf/erfc (about 1 ulp in double).
__KP_INLINE double erfinv_small(double y) {  // |y| <= 0.5
  double x = y * kSqrtPi / 2;
  for (int i = 0; i < 8; ++i) x -= (__builtin_erf(x) - y) / (2 / kSqrtPi * __builtin_exp(-x * x));
  return x;
}
__KP_INLINE double erfcinv(double t) {
  if (t != t || t < 0 || t > 2) return __builtin_nan("");
  if (t == 0) return __builtin_huge_val();
  if (t == 2) return -__builtin_huge_val();
  if (t >= 0.5 && t <= 1.5) return erfinv_small(1.0 - t);
  if (t > 1.5) return -erfcinv(2.0 - t);
  double x = __builtin_sqrt(-__builtin_log(t));  // asymptotic start: erfc(x) ~ e^-x^2/(x sqrt(pi))
  double l = -__builtin_log(t * x * kSqrtPi);
  if (l > 0) x = __builtin_sqrt(l);
  for (int i = 0; i < 40; ++i) {
    double dx = (__builtin_erfc(x) - t) / (2 / kSqrtPi * __builtin_exp(-x * x));
    x += dx;
    if (__builtin_fabs(dx) <= 1e-17 * x) break;
  }
  return x;
}
__KP_INLINE double erfinv(double y) {
  if (y != y || y < -1 || y > 1) return __builtin_nan("");
  if (__builtin_fabs(y) <= 0.5) return erfinv_small(y);
  double r = erfcinv(1.0 - __builtin_fabs(y));
  return y < 0 ? -r : r;
}
__KP_INLINE double erfcx(double x) {
  if (x < 10) return __builtin_exp(x * x) * __builtin_erfc(x);
  // Asymptotic series 1/(x sqrt(pi)) * sum (-1)^k (2k-1)!! / (2x^2)^k, converged for x >= 10.
  double inv = 1 / (2 * x * x), term = 1, sum = 1;
  for (int k = 1; k < 16; ++k) sum += (term *= -(2 * k - 1) * inv);
  return sum / (x * kSqrtPi);
}
}  // namespace __kp_cuda

__KP_INLINE float rcbrtf(float x) { return (float)(1.0 / __builtin_cbrt((double)x)); }
__KP_INLINE double rcbrt(double x) { return 1.0 / __builtin_cbrt(x); }
__KP_INLINE float sinpif(float x) { return (float)__kp_cuda::sinpi(x); }
__KP_INLINE float cospif(float x) { return (float)__kp_cuda::cospi(x); }
__KP_INLINE double sinpi(double x) { return __kp_cuda::sinpi(x); }
__KP_INLINE double cospi(double x) { return __kp_cuda::cospi(x); }
__KP_INLINE void sincospif(float x, float* s, float* c) {
  *s = sinpif(x);
  *c = cospif(x);
}
__KP_INLINE void sincospi(double x, double* s, double* c) {
  *s = sinpi(x);
  *c = cospi(x);
}
__KP_INLINE float erfinvf(float y) { return (float)__kp_cuda::erfinv(y); }
__KP_INLINE double erfinv(double y) { return __kp_cuda::erfinv(y); }
__KP_INLINE float erfcinvf(float y) { return (float)__kp_cuda::erfcinv(y); }
__KP_INLINE double erfcinv(double y) { return __kp_cuda::erfcinv(y); }
__KP_INLINE float erfcxf(float x) { return (float)__kp_cuda::erfcx(x); }
__KP_INLINE double erfcx(double x) { return __kp_cuda::erfcx(x); }
__KP_INLINE float normcdff(float x) {
  return (float)(0.5 * __builtin_erfc(-(double)x / __kp_cuda::kSqrt2));
}
__KP_INLINE double normcdf(double x) { return 0.5 * __builtin_erfc(-x / __kp_cuda::kSqrt2); }
__KP_INLINE float normcdfinvf(float p) {
  return (float)(-__kp_cuda::kSqrt2 * __kp_cuda::erfcinv(2.0 * p));
}
__KP_INLINE double normcdfinv(double p) { return -__kp_cuda::kSqrt2 * __kp_cuda::erfcinv(2.0 * p); }
// Norms in double: no overflow or underflow of the squares for float inputs.
__KP_INLINE float norm3df(float a, float b, float c) {
  return (float)__builtin_sqrt((double)a * a + (double)b * b + (double)c * c);
}
__KP_INLINE float rnorm3df(float a, float b, float c) {
  return (float)(1.0 / __builtin_sqrt((double)a * a + (double)b * b + (double)c * c));
}
__KP_INLINE float norm4df(float a, float b, float c, float d) {
  return (float)__builtin_sqrt((double)a * a + (double)b * b + (double)c * c + (double)d * d);
}
__KP_INLINE float rnorm4df(float a, float b, float c, float d) {
  return (float)(1.0 /
                 __builtin_sqrt((double)a * a + (double)b * b + (double)c * c + (double)d * d));
}
__KP_INLINE float rhypotf(float a, float b) { return (float)(1.0 / __builtin_hypot(a, b)); }
__KP_INLINE double norm3d(double a, double b, double c) {
  return __builtin_hypot(__builtin_hypot(a, b), c);
}
__KP_INLINE double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
__KP_INLINE double norm4d(double a, double b, double c, double d) {
  return __builtin_hypot(__builtin_hypot(a, b), __builtin_hypot(c, d));
}
__KP_INLINE double rnorm4d(double a, double b, double c, double d) {
  return 1.0 / norm4d(a, b, c, d);
}
__KP_INLINE double rhypot(double a, double b) { return 1.0 / __builtin_hypot(a, b); }
__KP_INLINE float normf(int dim, const float* p) {
  double s = 0;
  for (int i = 0; i < dim; ++i) s += (double)p[i] * p[i];
  return (float)__builtin_sqrt(s);
}
__KP_INLINE float rnormf(int dim, const float* p) { return 1.0f / normf(dim, p); }
__KP_INLINE double norm(int dim, const double* p) {
  double s = 0;
  for (int i = 0; i < dim; ++i) s = __builtin_hypot(s, p[i]);
  return s;
}
__KP_INLINE double rnorm(int dim, const double* p) { return 1.0 / norm(dim, p); }
