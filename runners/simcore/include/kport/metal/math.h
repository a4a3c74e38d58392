// Metal floating-point math (<metal_math>, <metal_common>), lane-wise on vectors. half and bfloat
// lanes are computed in float and rounded once; float in float via libm (double where that is
// the easy way to a correctly rounded float); double scalars in double.
// Templates, so that a kernel's own non-template `float erf(float)` wins overload resolution.
#pragma once
#pragma clang system_header
#include "arith.h"

namespace kp {

// Largest value of E below 1: Metal's fract() never returns 1.
template <class E>
KP_INLINE constexpr E below_one() {
  return __builtin_bit_cast(E, bits_t<E>(__builtin_bit_cast(bits_t<E>, E(1)) - 1));
}

// sin(pi*x) and cos(pi*x), exact at integers and half-integers (sinpi(1) is 0, not 1e-16).
KP_INLINE double sinpi(double x) {
  double r = __builtin_fmod(x, 2.0);  // exact
  if (r == __builtin_trunc(r)) return __builtin_copysign(0.0, x);
  return __builtin_sin(r * 3.14159265358979323846);
}
KP_INLINE double cospi(double x) {
  double r = __builtin_fmod(__builtin_fabs(x), 2.0);
  if (r == 0.5 || r == 1.5) return 0.0;
  return __builtin_cos(r * 3.14159265358979323846);
}

// Inverse error function: Winitzki's closed form as a start, then Newton steps on erf in double.
KP_INLINE double erfinv(double y) {
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
KP_INLINE E nextafter1(E x, E y) {
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

}  // namespace kp

namespace metal {

#define KP_FP_UNARY(name, expr)                                        \
  template <class X>                                                   \
    requires kp::fp_like<X>                                            \
  KP_INLINE X name(X x) {                                              \
    return kp::map_c<X>([](auto v) { return expr; }, x);               \
  }
// Functions MSL does not have: kernels that use them must define them (MLX does, in header=).
#define KP_NOT_MSL(name)                                                                        \
  [[deprecated(#name "() is not part of the Metal Shading Language: on an Apple GPU this call " \
                     "does not compile unless the kernel defines it (MLX kernels/erf.h, "       \
                     "expm1f.h)")]]
#define KP_FP_UNARY_NOT_MSL(name, expr)                                \
  template <class X>                                                   \
    requires kp::fp_like<X>                                            \
  KP_NOT_MSL(name) KP_INLINE X name(X x) {                             \
    return kp::map_c<X>([](auto v) { return expr; }, x);               \
  }

KP_FP_UNARY(acos, kp::lm::acos(v))
KP_FP_UNARY(acosh, kp::lm::acosh(v))
KP_FP_UNARY(asin, kp::lm::asin(v))
KP_FP_UNARY(asinh, kp::lm::asinh(v))
KP_FP_UNARY(atan, kp::lm::atan(v))
KP_FP_UNARY(atanh, kp::lm::atanh(v))
KP_FP_UNARY(ceil, kp::lm::ceil(v))
KP_FP_UNARY(cos, kp::lm::cos(v))
KP_FP_UNARY(cosh, kp::lm::cosh(v))
KP_FP_UNARY(cospi, decltype(v)(kp::cospi(v)))
KP_FP_UNARY(exp, kp::lm::exp(v))
KP_FP_UNARY(exp2, kp::lm::exp2(v))
KP_FP_UNARY(exp10, decltype(v)(__builtin_pow(10.0, double(v))))
KP_FP_UNARY(fabs, kp::lm::fabs(v))
KP_FP_UNARY(floor, kp::lm::floor(v))
KP_FP_UNARY(log, kp::lm::log(v))
KP_FP_UNARY(log10, kp::lm::log10(v))
KP_FP_UNARY(log2, kp::lm::log2(v))
KP_FP_UNARY(log1p, kp::lm::log1p(v))  // not MSL, but MLX's prelude provides it
KP_FP_UNARY(logb, kp::lm::logb(v))
KP_FP_UNARY(rint, kp::lm::rint(v))
KP_FP_UNARY(round, kp::lm::round(v))
KP_FP_UNARY(rsqrt, decltype(v)(1.0 / __builtin_sqrt(double(v))))
KP_FP_UNARY(sin, kp::lm::sin(v))
KP_FP_UNARY(sinh, kp::lm::sinh(v))
KP_FP_UNARY(sinpi, decltype(v)(kp::sinpi(v)))
KP_FP_UNARY(sqrt, kp::lm::sqrt(v))
KP_FP_UNARY(tan, kp::lm::tan(v))
KP_FP_UNARY(tanh, kp::lm::tanh(v))
KP_FP_UNARY(tanpi, decltype(v)(kp::sinpi(v) / kp::cospi(v)))
KP_FP_UNARY(trunc, kp::lm::trunc(v))
// Metal returns 0 for a NaN, and keeps the sign of a zero.
KP_FP_UNARY(sign, v != v ? decltype(v)(0) : v > 0 ? decltype(v)(1) : v < 0 ? decltype(v)(-1) : v)
KP_FP_UNARY_NOT_MSL(erf, kp::lm::erf(v))
KP_FP_UNARY_NOT_MSL(erfinv, decltype(v)(kp::erfinv(double(v))))
KP_FP_UNARY_NOT_MSL(expm1, kp::lm::expm1(v))
#undef KP_FP_UNARY
#undef KP_FP_UNARY_NOT_MSL
#undef KP_NOT_MSL

// x - floor(x), clamped below 1 in the result type (Metal: fmin(x - floor(x), 0x1.fffffep-1f)).
template <class X>
  requires kp::fp_like<X>
KP_INLINE X fract(X x) {
  using E = kp::elem_t<X>;
  return kp::map_e<X>(
      [](E v) {
        E r = E(kp::calc_t<E>(v) - kp::lm::floor(kp::calc_t<E>(v)));
        return r >= E(1) ? kp::below_one<E>() : r;
      },
      x);
}

// ---- two and three operands ---------------------------------------------------------------------
#define KP_FP_BINARY(name, expr)                                                    \
  template <class A, class B, class R = kp::common2_t<A, B>>                        \
    requires kp::fp_like<R>                                                         \
  KP_INLINE R name(A a, B b) {                                                      \
    return kp::map_c<R>([](auto x, auto y) { return expr; }, a, b);                 \
  }
KP_FP_BINARY(atan2, kp::lm::atan2(x, y))
KP_FP_BINARY(copysign, kp::lm::copysign(x, y))
KP_FP_BINARY(divide, x / y)
KP_FP_BINARY(fdim, x > y ? x - y : (x != x || y != y) ? x + y : decltype(x)(0))
KP_FP_BINARY(fmod, kp::lm::fmod(x, y))
KP_FP_BINARY(hypot, kp::lm::hypot(x, y))
KP_FP_BINARY(pow, kp::lm::pow(x, y))
// powr is only defined for x >= 0; a NaN shows where a kernel relies on anything else.
KP_FP_BINARY(powr, x < 0 ? __builtin_nanf("") : kp::lm::pow(x, y))
// step(edge, x): 0 where x < edge, else 1.
KP_FP_BINARY(step, y < x ? decltype(x)(0) : decltype(x)(1))
#undef KP_FP_BINARY

template <class A, class B, class R = kp::common2_t<A, B>>
  requires kp::fp_like<R>
KP_INLINE R fmin(A a, B b) { return kp::map_e<R>(kp::min1<kp::elem_t<R>>, a, b); }
template <class A, class B, class R = kp::common2_t<A, B>>
  requires kp::fp_like<R>
KP_INLINE R fmax(A a, B b) { return kp::map_e<R>(kp::max1<kp::elem_t<R>>, a, b); }
template <class A, class B, class R = kp::common2_t<A, B>>
  requires kp::fp_like<R>
KP_INLINE R nextafter(A a, B b) { return kp::map_e<R>(kp::nextafter1<kp::elem_t<R>>, a, b); }

// min/max/clamp/abs serve floating and integer lanes alike.
template <class A, class B, class R = kp::common2_t<A, B>>
  requires kp::num_like<R>
KP_INLINE R min(A a, B b) { return kp::map_e<R>(kp::min1<kp::elem_t<R>>, a, b); }
template <class A, class B, class R = kp::common2_t<A, B>>
  requires kp::num_like<R>
KP_INLINE R max(A a, B b) { return kp::map_e<R>(kp::max1<kp::elem_t<R>>, a, b); }
// Metal leaves clamp undefined for lo > hi; this gives hi.
template <class X, class L, class H, class R = kp::common3_t<X, L, H>>
  requires kp::num_like<R>
KP_INLINE R clamp(X x, L lo, H hi) {
  using E = kp::elem_t<R>;
  return kp::map_e<R>([](E v, E l, E h) { return kp::min1(kp::max1(v, l), h); }, x, lo, hi);
}
template <class X>
  requires kp::num_like<X>
KP_INLINE X abs(X x) {
  using E = kp::elem_t<X>;
  if constexpr (kp::fp_like<X>)
    return fabs(x);
  else
    return kp::map_e<X>([](E v) { return v < E(0) ? E(0 - v) : v; }, x);
}
template <class X>
  requires kp::fp_like<X>
KP_INLINE X saturate(X x) {
  return clamp(x, kp::elem_t<X>(0), kp::elem_t<X>(1));
}

#define KP_THREE(name, body)                                                        \
  template <class A, class B, class C, class R = kp::common3_t<A, B, C>>            \
    requires kp::num_like<R>                                                        \
  KP_INLINE R name(A a, B b, C c) {                                                 \
    using E = kp::elem_t<R>;                                                        \
    return kp::map_e<R>([](E x, E y, E z) { return body; }, a, b, c);               \
  }
KP_THREE(min3, kp::min1(kp::min1(x, y), z))
KP_THREE(max3, kp::max1(kp::max1(x, y), z))
KP_THREE(median3, kp::max1(kp::min1(x, y), kp::min1(kp::max1(x, y), z)))
KP_THREE(fmin3, kp::min1(kp::min1(x, y), z))
KP_THREE(fmax3, kp::max1(kp::max1(x, y), z))
KP_THREE(fmedian3, kp::max1(kp::min1(x, y), kp::min1(kp::max1(x, y), z)))
#undef KP_THREE

template <class A, class B, class C, class R = kp::common3_t<A, B, C>>
  requires kp::fp_like<R>
KP_INLINE R fma(A a, B b, C c) {
  return kp::map_c<R>(
      [](auto x, auto y, auto z) {
        if constexpr (kp::is_same_v<decltype(x), double>)
          return __builtin_fma(x, y, z);
        else
          return __builtin_fmaf(x, y, z);
      },
      a, b, c);
}
// mix(x, y, a) = x + (y - x) * a.
template <class A, class B, class C, class R = kp::common3_t<A, B, C>>
  requires kp::fp_like<R>
KP_INLINE R mix(A x, B y, C a) {
  return kp::map_c<R>([](auto u, auto v, auto t) { return u + (v - u) * t; }, x, y, a);
}
template <class A, class B, class C, class R = kp::common3_t<A, B, C>>
  requires kp::fp_like<R>
KP_INLINE R smoothstep(A edge0, B edge1, C x) {
  return kp::map_c<R>(
      [](auto e0, auto e1, auto v) {
        auto t = kp::min1(kp::max1((v - e0) / (e1 - e0), decltype(v)(0)), decltype(v)(1));
        return t * t * (decltype(v)(3) - decltype(v)(2) * t);
      },
      edge0, edge1, x);
}

// ---- functions with an integer side --------------------------------------------------------------
template <class X, class K>
  requires kp::fp_like<X> && kp::is_same_v<K, kp::lanes_of_t<int, X>>
KP_INLINE X ldexp(X x, K k) {
  X r;
  if constexpr (kp::vinfo<X>::is_vector)
    for (int i = 0; i < kp::lanes_v<X>; ++i)
      r[i] = kp::elem_t<X>(kp::lm::ldexp(kp::calc_t<kp::elem_t<X>>(x[i]), k[i]));
  else
    r = X(kp::lm::ldexp(kp::calc_t<X>(x), k));
  return r;
}
template <class X>
  requires kp::fp_like<X> && kp::vinfo<X>::is_vector
KP_INLINE X ldexp(X x, int k) {
  return ldexp(x, kp::lanes_of_t<int, X>(k));
}
template <class X>
  requires kp::fp_like<X>
KP_INLINE X frexp(X x, kp::lanes_of_t<int, X>& exponent) {
  X r;
  if constexpr (kp::vinfo<X>::is_vector) {
    for (int i = 0; i < kp::lanes_v<X>; ++i) {
      int e;
      r[i] = kp::elem_t<X>(kp::lm::frexp(kp::calc_t<kp::elem_t<X>>(x[i]), &e));
      exponent[i] = e;
    }
  } else {
    r = X(kp::lm::frexp(kp::calc_t<X>(x), &exponent));
  }
  return r;
}
template <class X>
  requires kp::fp_like<X>
KP_INLINE kp::lanes_of_t<int, X> ilogb(X x) {
  kp::lanes_of_t<int, X> r;
  if constexpr (kp::vinfo<X>::is_vector)
    for (int i = 0; i < kp::lanes_v<X>; ++i) r[i] = kp::lm::ilogb(kp::calc_t<kp::elem_t<X>>(x[i]));
  else
    r = kp::lm::ilogb(kp::calc_t<X>(x));
  return r;
}
// modf: the fractional part, with the integral part stored through `integral`.
template <class X>
  requires kp::fp_like<X>
KP_INLINE X modf(X x, X& integral) {
  integral = trunc(x);
  return kp::map_e<X>([](auto v, auto i) { return v == i ? copysign(decltype(v)(0), v) : v - i; },
                      x, integral);
}
// sincos: returns sin(x) and stores cos(x) (Metal's signature).
template <class X>
  requires kp::fp_like<X>
KP_INLINE X sincos(X x, X& cosval) {
  cosval = cos(x);
  return sin(x);
}

// ---- geometric ----------------------------------------------------------------------------------
// Accumulated in float for half/bfloat lanes, rounded once. unconfirmed: Apple's half dot order.
template <class V>
  requires kp::fp_like<V> && kp::vinfo<V>::is_vector
KP_INLINE kp::elem_t<V> dot(V a, V b) {
  kp::calc_t<kp::elem_t<V>> s = 0;
  for (int i = 0; i < kp::lanes_v<V>; ++i) s += kp::calc_t<kp::elem_t<V>>(a[i]) * b[i];
  return kp::elem_t<V>(s);
}
template <class V>
  requires kp::fp_like<V> && kp::vinfo<V>::is_vector
KP_INLINE kp::elem_t<V> length_squared(V a) {
  return dot(a, a);
}
template <class V>
  requires kp::fp_like<V> && kp::vinfo<V>::is_vector
KP_INLINE kp::elem_t<V> length(V a) {
  kp::calc_t<kp::elem_t<V>> s = 0;
  for (int i = 0; i < kp::lanes_v<V>; ++i) s += kp::calc_t<kp::elem_t<V>>(a[i]) * a[i];
  return kp::elem_t<V>(kp::lm::sqrt(s));
}
template <class V>
  requires kp::fp_like<V> && kp::vinfo<V>::is_vector
KP_INLINE kp::elem_t<V> distance(V a, V b) {
  return length(a - b);
}
template <class V>
  requires kp::fp_like<V> && kp::vinfo<V>::is_vector
KP_INLINE V normalize(V a) {
  using C = kp::calc_t<kp::elem_t<V>>;
  C s = 0;
  for (int i = 0; i < kp::lanes_v<V>; ++i) s += C(a[i]) * a[i];
  C inv = C(1) / kp::lm::sqrt(s);
  return kp::map_c<V>([inv](C v) { return v * inv; }, a);
}
template <class V>
  requires kp::fp_like<V> && (kp::lanes_v<V> == 3)
KP_INLINE V cross(V a, V b) {
  return a.yzx * b.zxy - a.zxy * b.yzx;
}
template <class V>
  requires kp::fp_like<V> && kp::vinfo<V>::is_vector
KP_INLINE V reflect(V i, V n) {
  return i - kp::elem_t<V>(2) * dot(n, i) * n;
}
template <class V>
  requires kp::fp_like<V> && kp::vinfo<V>::is_vector
KP_INLINE V faceforward(V n, V i, V nref) {
  return dot(nref, i) < kp::elem_t<V>(0) ? n : -n;
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
