// Metal floating-point math (<metal_math>, <metal_common>), lane-wise on vectors. half and bfloat
// lanes are computed in float and rounded once; float in float via libm (double where that is
// the easy way to a correctly rounded float); double scalars in double.
// Templates, so that a kernel's own non-template `float erf(float)` wins overload resolution.
#pragma once
#pragma clang system_header
#include "arith.h"

namespace __kp {

// Largest value of E below 1: Metal's fract() never returns 1.
template <class E>
__KP_INLINE constexpr E below_one() {
  return __builtin_bit_cast(E, bits_t<E>(__builtin_bit_cast(bits_t<E>, E(1)) - 1));
}

// sin(pi*x) and cos(pi*x), exact at integers and half-integers (sinpi(1) is 0, not 1e-16).
__KP_INLINE double sinpi(double x) {
  double r = __builtin_fmod(x, 2.0);  // exact
  if (r == __builtin_trunc(r)) return __builtin_copysign(0.0, x);
  return __builtin_sin(r * 3.14159265358979323846);
}
__KP_INLINE double cospi(double x) {
  double r = __builtin_fmod(__builtin_fabs(x), 2.0);
  if (r == 0.5 || r == 1.5) return 0.0;
  return __builtin_cos(r * 3.14159265358979323846);
}

// Inverse error function: Winitzki's closed form as a start, then Newton steps on erf in double.
__KP_INLINE double erfinv(double y) {
  if (!(y > -1.0 && y < 1.0)) return (y == 1.0 || y == -1.0) ? y * __builtin_inf() : __builtin_nan("");
  if (y == 0.0) return y;
  const double a = 0.147, two_over_pi_a = 2.0 / (3.14159265358979323846 * a);
  double l = __builtin_log1p(-y * y);
  double t = two_over_pi_a + 0.5 * l;
  double x = __builtin_copysign(__builtin_sqrt(__builtin_sqrt(t * t - l / a) - t), y);
  for (int i = 0; i < 3; ++i) {
    double err = __builtin_erf(x) - y;
    x -= err / (1.1283791670955126 * __builtin_exp(-x * x));
  }
  return x;
}

// Next representable value of E after x towards y, stepping in E's own ulps.
template <class E>
__KP_INLINE E nextafter1(E x, E y) {
  using B = bits_t<E>;
  if (x != x || y != y) return x + y;
  if (x == y) return y;
  if (x == E(0)) {
    B tiny = 1;
    return y > E(0) ? __builtin_bit_cast(E, tiny) : -__builtin_bit_cast(E, tiny);
  }
  B b = __builtin_bit_cast(B, x);
  b = ((x < y) == (x > E(0))) ? B(b + 1) : B(b - 1);
  return __builtin_bit_cast(E, b);
}

}  // namespace __kp

namespace metal {

#define __KP_FP_UNARY(name, expr)                                        \
  template <class X>                                                   \
    requires __kp::fp_like<X>                                            \
  __KP_INLINE X name(X x) {                                              \
    return __kp::map_c<X>([](auto v) { return expr; }, x);               \
  }
// Functions MSL does not have: kernels that use them must define them (MLX does, in header=).
#define __KP_NOT_MSL(name)                                                                        \
  [[deprecated(#name "() is not part of the Metal Shading Language: on an Apple GPU this call " \
                     "does not compile unless the kernel defines it (MLX kernels/erf.h, "       \
                     "expm1f.h)")]]
#define __KP_FP_UNARY_NOT_MSL(name, expr)                                \
  template <class X>                                                   \
    requires __kp::fp_like<X>                                            \
  __KP_NOT_MSL(name) __KP_INLINE X name(X x) {                             \
    return __kp::map_c<X>([](auto v) { return expr; }, x);               \
  }

__KP_FP_UNARY(acos, __kp::lm::acos(v))
__KP_FP_UNARY(acosh, __kp::lm::acosh(v))
__KP_FP_UNARY(asin, __kp::lm::asin(v))
__KP_FP_UNARY(asinh, __kp::lm::asinh(v))
__KP_FP_UNARY(atan, __kp::lm::atan(v))
__KP_FP_UNARY(atanh, __kp::lm::atanh(v))
__KP_FP_UNARY(ceil, __kp::lm::ceil(v))
__KP_FP_UNARY(cos, __kp::lm::cos(v))
__KP_FP_UNARY(cosh, __kp::lm::cosh(v))
__KP_FP_UNARY(cospi, decltype(v)(__kp::cospi(v)))
__KP_FP_UNARY(exp, __kp::lm::exp(v))
__KP_FP_UNARY(exp2, __kp::lm::exp2(v))
__KP_FP_UNARY(exp10, decltype(v)(__builtin_pow(10.0, double(v))))
__KP_FP_UNARY(fabs, __kp::lm::fabs(v))
__KP_FP_UNARY(floor, __kp::lm::floor(v))
__KP_FP_UNARY(log, __kp::lm::log(v))
__KP_FP_UNARY(log10, __kp::lm::log10(v))
__KP_FP_UNARY(log2, __kp::lm::log2(v))
__KP_FP_UNARY(log1p, __kp::lm::log1p(v))  // not MSL, but MLX's prelude provides it
__KP_FP_UNARY(logb, __kp::lm::logb(v))
__KP_FP_UNARY(rint, __kp::lm::rint(v))
__KP_FP_UNARY(round, __kp::lm::round(v))
__KP_FP_UNARY(rsqrt, decltype(v)(1.0 / __builtin_sqrt(double(v))))
__KP_FP_UNARY(sin, __kp::lm::sin(v))
__KP_FP_UNARY(sinh, __kp::lm::sinh(v))
__KP_FP_UNARY(sinpi, decltype(v)(__kp::sinpi(v)))
__KP_FP_UNARY(sqrt, __kp::lm::sqrt(v))
__KP_FP_UNARY(tan, __kp::lm::tan(v))
__KP_FP_UNARY(tanh, __kp::lm::tanh(v))
__KP_FP_UNARY(tanpi, decltype(v)(__kp::sinpi(v) / __kp::cospi(v)))
__KP_FP_UNARY(trunc, __kp::lm::trunc(v))
// Metal returns 0 for a NaN, and keeps the sign of a zero.
__KP_FP_UNARY(sign, v != v ? decltype(v)(0) : v > 0 ? decltype(v)(1) : v < 0 ? decltype(v)(-1) : v)
__KP_FP_UNARY_NOT_MSL(erf, __kp::lm::erf(v))
__KP_FP_UNARY_NOT_MSL(erfinv, decltype(v)(__kp::erfinv(double(v))))
__KP_FP_UNARY_NOT_MSL(expm1, __kp::lm::expm1(v))
#undef __KP_FP_UNARY
#undef __KP_FP_UNARY_NOT_MSL
#undef __KP_NOT_MSL

// x - floor(x), clamped below 1 in the result type (Metal: fmin(x - floor(x), 0x1.fffffep-1f)).
template <class X>
  requires __kp::fp_like<X>
__KP_INLINE X fract(X x) {
  using E = __kp::elem_t<X>;
  return __kp::map_e<X>(
      [](E v) {
        E r = E(__kp::calc_t<E>(v) - __kp::lm::floor(__kp::calc_t<E>(v)));
        return r >= E(1) ? __kp::below_one<E>() : r;
      },
      x);
}

// ---- two and three operands ---------------------------------------------------------------------
#define __KP_FP_BINARY(name, expr)                                                    \
  template <class A, class B, class R = __kp::common2_t<A, B>>                        \
    requires __kp::fp_like<R>                                                         \
  __KP_INLINE R name(A a, B b) {                                                      \
    return __kp::map_c<R>([](auto x, auto y) { return expr; }, a, b);                 \
  }
__KP_FP_BINARY(atan2, __kp::lm::atan2(x, y))
__KP_FP_BINARY(copysign, __kp::lm::copysign(x, y))
__KP_FP_BINARY(divide, x / y)
__KP_FP_BINARY(fdim, x > y ? x - y : (x != x || y != y) ? x + y : decltype(x)(0))
__KP_FP_BINARY(fmod, __kp::lm::fmod(x, y))
__KP_FP_BINARY(hypot, __kp::lm::hypot(x, y))
__KP_FP_BINARY(pow, __kp::lm::pow(x, y))
// powr is only defined for x >= 0; a NaN shows where a kernel relies on anything else.
__KP_FP_BINARY(powr, x < 0 ? __builtin_nanf("") : __kp::lm::pow(x, y))
// step(edge, x): 0 where x < edge, else 1.
__KP_FP_BINARY(step, y < x ? decltype(x)(0) : decltype(x)(1))
#undef __KP_FP_BINARY

template <class A, class B, class R = __kp::common2_t<A, B>>
  requires __kp::fp_like<R>
__KP_INLINE R fmin(A a, B b) { return __kp::map_e<R>(__kp::min1<__kp::elem_t<R>>, a, b); }
template <class A, class B, class R = __kp::common2_t<A, B>>
  requires __kp::fp_like<R>
__KP_INLINE R fmax(A a, B b) { return __kp::map_e<R>(__kp::max1<__kp::elem_t<R>>, a, b); }
template <class A, class B, class R = __kp::common2_t<A, B>>
  requires __kp::fp_like<R>
__KP_INLINE R nextafter(A a, B b) { return __kp::map_e<R>(__kp::nextafter1<__kp::elem_t<R>>, a, b); }

// min/max/clamp/abs serve floating and integer lanes alike.
template <class A, class B, class R = __kp::common2_t<A, B>>
  requires __kp::num_like<R>
__KP_INLINE R min(A a, B b) { return __kp::map_e<R>(__kp::min1<__kp::elem_t<R>>, a, b); }
template <class A, class B, class R = __kp::common2_t<A, B>>
  requires __kp::num_like<R>
__KP_INLINE R max(A a, B b) { return __kp::map_e<R>(__kp::max1<__kp::elem_t<R>>, a, b); }
// Metal leaves clamp undefined for lo > hi; this gives hi.
template <class X, class L, class H, class R = __kp::common3_t<X, L, H>>
  requires __kp::num_like<R>
__KP_INLINE R clamp(X x, L lo, H hi) {
  using E = __kp::elem_t<R>;
  return __kp::map_e<R>([](E v, E l, E h) { return __kp::min1(__kp::max1(v, l), h); }, x, lo, hi);
}
template <class X>
  requires __kp::num_like<X>
__KP_INLINE X abs(X x) {
  using E = __kp::elem_t<X>;
  if constexpr (__kp::fp_like<X>)
    return fabs(x);
  else
    return __kp::map_e<X>([](E v) { return v < E(0) ? E(0 - v) : v; }, x);
}
template <class X>
  requires __kp::fp_like<X>
__KP_INLINE X saturate(X x) {
  return clamp(x, __kp::elem_t<X>(0), __kp::elem_t<X>(1));
}

#define __KP_THREE(name, body)                                                        \
  template <class A, class B, class C, class R = __kp::common3_t<A, B, C>>            \
    requires __kp::num_like<R>                                                        \
  __KP_INLINE R name(A a, B b, C c) {                                                 \
    using E = __kp::elem_t<R>;                                                        \
    return __kp::map_e<R>([](E x, E y, E z) { return body; }, a, b, c);               \
  }
__KP_THREE(min3, __kp::min1(__kp::min1(x, y), z))
__KP_THREE(max3, __kp::max1(__kp::max1(x, y), z))
__KP_THREE(median3, __kp::max1(__kp::min1(x, y), __kp::min1(__kp::max1(x, y), z)))
__KP_THREE(fmin3, __kp::min1(__kp::min1(x, y), z))
__KP_THREE(fmax3, __kp::max1(__kp::max1(x, y), z))
__KP_THREE(fmedian3, __kp::max1(__kp::min1(x, y), __kp::min1(__kp::max1(x, y), z)))
#undef __KP_THREE

template <class A, class B, class C, class R = __kp::common3_t<A, B, C>>
  requires __kp::fp_like<R>
__KP_INLINE R fma(A a, B b, C c) {
  return __kp::map_c<R>(
      [](auto x, auto y, auto z) {
        if constexpr (__kp::is_same_v<decltype(x), double>)
          return __builtin_fma(x, y, z);
        else
          return __builtin_fmaf(x, y, z);
      },
      a, b, c);
}
// mix(x, y, a) = x + (y - x) * a.
template <class A, class B, class C, class R = __kp::common3_t<A, B, C>>
  requires __kp::fp_like<R>
__KP_INLINE R mix(A x, B y, C a) {
  return __kp::map_c<R>([](auto u, auto v, auto t) { return u + (v - u) * t; }, x, y, a);
}
template <class A, class B, class C, class R = __kp::common3_t<A, B, C>>
  requires __kp::fp_like<R>
__KP_INLINE R smoothstep(A edge0, B edge1, C x) {
  return __kp::map_c<R>(
      [](auto e0, auto e1, auto v) {
        auto t = __kp::min1(__kp::max1((v - e0) / (e1 - e0), decltype(v)(0)), decltype(v)(1));
        return t * t * (decltype(v)(3) - decltype(v)(2) * t);
      },
      edge0, edge1, x);
}

// ---- functions with an integer side --------------------------------------------------------------
template <class X, class K>
  requires __kp::fp_like<X> && __kp::is_same_v<K, __kp::lanes_of_t<int, X>>
__KP_INLINE X ldexp(X x, K k) {
  X r;
  if constexpr (__kp::vinfo<X>::is_vector)
    for (int i = 0; i < __kp::lanes_v<X>; ++i)
      r[i] = __kp::elem_t<X>(__kp::lm::ldexp(__kp::calc_t<__kp::elem_t<X>>(x[i]), k[i]));
  else
    r = X(__kp::lm::ldexp(__kp::calc_t<X>(x), k));
  return r;
}
template <class X>
  requires __kp::fp_like<X> && __kp::vinfo<X>::is_vector
__KP_INLINE X ldexp(X x, int k) {
  return ldexp(x, __kp::lanes_of_t<int, X>(k));
}
template <class X>
  requires __kp::fp_like<X>
__KP_INLINE X frexp(X x, __kp::lanes_of_t<int, X>& exponent) {
  X r;
  if constexpr (__kp::vinfo<X>::is_vector) {
    for (int i = 0; i < __kp::lanes_v<X>; ++i) {
      int e;
      r[i] = __kp::elem_t<X>(__kp::lm::frexp(__kp::calc_t<__kp::elem_t<X>>(x[i]), &e));
      exponent[i] = e;
    }
  } else {
    r = X(__kp::lm::frexp(__kp::calc_t<X>(x), &exponent));
  }
  return r;
}
template <class X>
  requires __kp::fp_like<X>
__KP_INLINE __kp::lanes_of_t<int, X> ilogb(X x) {
  __kp::lanes_of_t<int, X> r;
  if constexpr (__kp::vinfo<X>::is_vector)
    for (int i = 0; i < __kp::lanes_v<X>; ++i) r[i] = __kp::lm::ilogb(__kp::calc_t<__kp::elem_t<X>>(x[i]));
  else
    r = __kp::lm::ilogb(__kp::calc_t<X>(x));
  return r;
}
// modf: the fractional part, with the integral part stored through `integral`.
template <class X>
  requires __kp::fp_like<X>
__KP_INLINE X modf(X x, X& integral) {
  integral = trunc(x);
  return __kp::map_e<X>([](auto v, auto i) { return v == i ? copysign(decltype(v)(0), v) : v - i; },
                      x, integral);
}
// sincos: returns sin(x) and stores cos(x) (Metal's signature).
template <class X>
  requires __kp::fp_like<X>
__KP_INLINE X sincos(X x, X& cosval) {
  cosval = cos(x);
  return sin(x);
}

// ---- geometric ----------------------------------------------------------------------------------
// Accumulated in float for half/bfloat lanes, rounded once. unconfirmed: Apple's half dot order.
template <class V>
  requires __kp::fp_like<V> && __kp::vinfo<V>::is_vector
__KP_INLINE __kp::elem_t<V> dot(V a, V b) {
  __kp::calc_t<__kp::elem_t<V>> s = 0;
  for (int i = 0; i < __kp::lanes_v<V>; ++i) s += __kp::calc_t<__kp::elem_t<V>>(a[i]) * b[i];
  return __kp::elem_t<V>(s);
}
template <class V>
  requires __kp::fp_like<V> && __kp::vinfo<V>::is_vector
__KP_INLINE __kp::elem_t<V> length_squared(V a) {
  return dot(a, a);
}
template <class V>
  requires __kp::fp_like<V> && __kp::vinfo<V>::is_vector
__KP_INLINE __kp::elem_t<V> length(V a) {
  __kp::calc_t<__kp::elem_t<V>> s = 0;
  for (int i = 0; i < __kp::lanes_v<V>; ++i) s += __kp::calc_t<__kp::elem_t<V>>(a[i]) * a[i];
  return __kp::elem_t<V>(__kp::lm::sqrt(s));
}
template <class V>
  requires __kp::fp_like<V> && __kp::vinfo<V>::is_vector
__KP_INLINE __kp::elem_t<V> distance(V a, V b) {
  return length(a - b);
}
template <class V>
  requires __kp::fp_like<V> && __kp::vinfo<V>::is_vector
__KP_INLINE V normalize(V a) {
  using C = __kp::calc_t<__kp::elem_t<V>>;
  C s = 0;
  for (int i = 0; i < __kp::lanes_v<V>; ++i) s += C(a[i]) * a[i];
  C inv = C(1) / __kp::lm::sqrt(s);
  return __kp::map_c<V>([inv](C v) { return v * inv; }, a);
}
template <class V>
  requires __kp::fp_like<V> && (__kp::lanes_v<V> == 3)
__KP_INLINE V cross(V a, V b) {
  return a.yzx * b.zxy - a.zxy * b.yzx;
}
template <class V>
  requires __kp::fp_like<V> && __kp::vinfo<V>::is_vector
__KP_INLINE V reflect(V i, V n) {
  return i - __kp::elem_t<V>(2) * dot(n, i) * n;
}
template <class V>
  requires __kp::fp_like<V> && __kp::vinfo<V>::is_vector
__KP_INLINE V faceforward(V n, V i, V nref) {
  return dot(nref, i) < __kp::elem_t<V>(0) ? n : -n;
}

// Metal's fast:: and precise:: variants. The simulator uses one implementation for all three
// (libm, correctly rounded or nearly so); compare ported kernels with a tolerance.
namespace fast {
using metal::acos, metal::acosh, metal::asin, metal::asinh, metal::atan, metal::atan2,
    metal::atanh, metal::ceil, metal::clamp, metal::copysign, metal::cos, metal::cosh,
    metal::cospi, metal::divide, metal::exp, metal::exp10, metal::exp2, metal::fabs, metal::fdim,
    metal::floor, metal::fma, metal::fmax, metal::fmax3, metal::fmedian3, metal::fmin,
    metal::fmin3, metal::fmod, metal::fract, metal::frexp, metal::ilogb, metal::ldexp, metal::log,
    metal::log10, metal::log2, metal::max, metal::max3, metal::median3, metal::min, metal::min3,
    metal::modf, metal::nextafter, metal::pow, metal::powr, metal::rint, metal::round,
    metal::rsqrt, metal::saturate, metal::sign, metal::sin, metal::sincos, metal::sinh,
    metal::sinpi, metal::sqrt, metal::tan, metal::tanh, metal::tanpi, metal::trunc,
    metal::length, metal::normalize, metal::distance, metal::abs, metal::smoothstep,
    metal::step, metal::mix;
}  // namespace fast
namespace precise {
using namespace metal::fast;
}  // namespace precise

}  // namespace metal
