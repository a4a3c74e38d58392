// Lane machinery shared by the math, integer and relational functions: which type a mixed call
// computes in, and applying a scalar operation to every lane.
#pragma once
#pragma clang system_header
#include "matrix.h"

namespace __kp {

// Packed vectors take part in math as their aligned vector.
template <class X>
using norm_t = decltype(unpack(declval<const X&>()));

// The type a two-operand Metal function computes in, or void when Metal would reject the call:
// equal types; a vector with a scalar (the scalar splats); a floating scalar with a double
// (unsuffixed literals such as 0.5 are float in Metal) or with an integer (ggml writes
// fmax(0, x) and pow(x, n)); half or bfloat with float (float). Two different integer types are
// ambiguous in Metal (min(uint, int)) and rejected here too.
template <class A, class B>
consteval auto common2_of() {
  if constexpr (is_same_v<A, B>)
    return type_is<A>{};
  else if constexpr (ext_vector<A> && arith_scalar<B>)
    return type_is<A>{};
  else if constexpr (arith_scalar<A> && ext_vector<B>)
    return type_is<B>{};
  else if constexpr (fp_scalar<A> && int_scalar<B>)
    return type_is<A>{};
  else if constexpr (int_scalar<A> && fp_scalar<B>)
    return type_is<B>{};
  else if constexpr (fp_scalar<A> && fp_scalar<B>) {
    if constexpr (is_same_v<A, double>)
      return type_is<B>{};
    else if constexpr (is_same_v<B, double>)
      return type_is<A>{};
    else if constexpr (is_same_v<A, float> || is_same_v<B, float>)
      return type_is<float>{};
    else
      return type_is<void>{};  // half with bfloat: no implicit conversion either way
  } else
    return type_is<void>{};
}
template <class A, class B>
using common2_t = typename decltype(common2_of<norm_t<A>, norm_t<B>>())::type;
template <class A, class B, class C>
using common3_t = common2_t<common2_t<A, B>, C>;

// r[i] = f(a[i], b[i], ...) with every lane as the element type E. (Not constexpr: clang 22
// crashes constant-evaluating stores to ext-vector lanes.)
template <class R, class F, class... A>
__KP_INLINE R map_e_impl(F f, const A&... a) {
  if constexpr (vinfo<R>::is_vector) {
    R r;
    for (int i = 0; i < lanes_v<R>; ++i) r[i] = f(a[i]...);
    return r;
  } else {
    return f(a...);
  }
}
template <class R, class F, class... A>
__KP_INLINE R map_e(F f, const A&... a) {
  return map_e_impl<R>(f, as_arg<R>(a)...);
}

// Same, but each lane is widened to calc_t (float for half/bfloat) and the result rounded back.
template <class R, class F, class... A>
__KP_INLINE R map_c_impl(F f, const A&... a) {
  using E = elem_t<R>;
  using C = calc_t<E>;
  if constexpr (vinfo<R>::is_vector) {
    R r;
    for (int i = 0; i < lanes_v<R>; ++i) r[i] = E(f(C(a[i])...));
    return r;
  } else {
    return E(f(C(a)...));
  }
}
template <class R, class F, class... A>
__KP_INLINE R map_c(F f, const A&... a) {
  return map_c_impl<R>(f, as_arg<R>(a)...);
}

// A vector of N lanes of T, or T itself when X is a scalar (int results of ilogb, frexp...).
template <class T, class X>
using lanes_of_t = conditional_t<vinfo<X>::is_vector, metal::vec<T, lanes_v<X>>, T>;
template <class X>
using bools_of_t = conditional_t<vinfo<X>::is_vector, boolvec<lanes_v<X>>, bool>;

// libm entry points for float and double (clang builtins, so no <math.h> in the TU).
namespace lm {
#define __KP_LM1(fn)                                                      \
  __KP_INLINE float fn(float x) { return __builtin_##fn##f(x); }          \
  __KP_INLINE double fn(double x) { return __builtin_##fn(x); }
#define __KP_LM2(fn)                                                              \
  __KP_INLINE float fn(float x, float y) { return __builtin_##fn##f(x, y); }      \
  __KP_INLINE double fn(double x, double y) { return __builtin_##fn(x, y); }
__KP_LM1(acos) __KP_LM1(acosh) __KP_LM1(asin) __KP_LM1(asinh) __KP_LM1(atan) __KP_LM1(atanh)
__KP_LM1(ceil) __KP_LM1(cos) __KP_LM1(cosh) __KP_LM1(erf) __KP_LM1(exp) __KP_LM1(exp2) __KP_LM1(expm1)
__KP_LM1(fabs) __KP_LM1(floor) __KP_LM1(log) __KP_LM1(log10) __KP_LM1(log1p) __KP_LM1(log2) __KP_LM1(rint)
__KP_LM1(round) __KP_LM1(sin) __KP_LM1(sinh) __KP_LM1(sqrt) __KP_LM1(tan) __KP_LM1(tanh) __KP_LM1(trunc)
__KP_LM1(logb)
__KP_LM2(atan2) __KP_LM2(copysign) __KP_LM2(fmod) __KP_LM2(pow) __KP_LM2(hypot)
#undef __KP_LM1
#undef __KP_LM2
__KP_INLINE int ilogb(float x) { return __builtin_ilogbf(x); }
__KP_INLINE int ilogb(double x) { return __builtin_ilogb(x); }
__KP_INLINE float ldexp(float x, int k) { return __builtin_ldexpf(x, k); }
__KP_INLINE double ldexp(double x, int k) { return __builtin_ldexp(x, k); }
__KP_INLINE float frexp(float x, int* e) { return __builtin_frexpf(x, e); }
__KP_INLINE double frexp(double x, int* e) { return __builtin_frexp(x, e); }
}  // namespace lm

// min/max of one lane. Floating lanes follow fmin/fmax: a NaN operand yields the other one.
template <class E>
__KP_INLINE constexpr E min1(E x, E y) {
  if constexpr (fp_scalar<E>)
    return (y < x || x != x) ? y : x;
  else
    return y < x ? y : x;
}
template <class E>
__KP_INLINE constexpr E max1(E x, E y) {
  if constexpr (fp_scalar<E>)
    return (y > x || x != x) ? y : x;
  else
    return y > x ? y : x;
}

// The unsigned integer type of E's size, for bit manipulation of any lane type.
template <class E>
using bits_t = conditional_t<
    sizeof(E) == 1, uint8_t,
    conditional_t<sizeof(E) == 2, uint16_t, conditional_t<sizeof(E) == 4, uint32_t, uint64_t>>>;

}  // namespace __kp
