// Metal relational functions (<metal_relational>): all/any over bool vectors or comparison masks,
// select, and the floating classification tests (bool, or boolN for vectors).
#pragma once
#pragma clang system_header
#include "arith.h"

namespace __kp {

template <class C>
concept condition = is_same_v<C, bool> ||
                    (vinfo<C>::is_vector && !vinfo<C>::is_ext && is_same_v<elem_t<C>, bool>) ||
                    (ext_vector<C> && __is_integral(elem_t<C>));

}  // namespace __kp

namespace metal {

// True when every lane of a bool vector (or of a comparison mask such as `a < b`) is true.
template <class C>
  requires __kp::condition<C>
__KP_INLINE constexpr bool all(C c) {
  for (int i = 0; i < __kp::lanes_v<C>; ++i)
    if (!__kp::truth(c, i)) return false;
  return true;
}
template <class C>
  requires __kp::condition<C>
__KP_INLINE constexpr bool any(C c) {
  for (int i = 0; i < __kp::lanes_v<C>; ++i)
    if (__kp::truth(c, i)) return true;
  return false;
}

// select(a, b, c): b where c is true, a elsewhere (lane-wise for vector conditions). A scalar
// condition may be any integer (ggml: select(1, -1, bits & mask)).
template <class A, class B, class C, class R = __kp::common2_t<A, B>>
  requires(!__kp::is_same_v<R, void> &&
           ((__kp::condition<C> && (__kp::lanes_v<C> == 1 || __kp::lanes_v<C> == __kp::lanes_v<R>)) ||
            (!__kp::vinfo<R>::is_vector && __kp::arith_scalar<C>)))
__KP_INLINE R select(A a, B b, C c) {
  R ra = __kp::as_arg<R>(a), rb = __kp::as_arg<R>(b);
  if constexpr (__kp::vinfo<R>::is_vector) {
    R r;
    for (int i = 0; i < __kp::lanes_v<R>; ++i) r[i] = __kp::truth(c, i) ? rb[i] : ra[i];
    return r;
  } else {
    return __kp::truth(c, 0) ? rb : ra;
  }
}
template <class A, class B>
  requires(!__kp::vinfo<A>::is_vector && __kp::is_same_v<A, B> && !__kp::arith_scalar<A>)
__KP_INLINE A select(A a, B b, bool c) {
  return c ? b : a;
}

#define __KP_CLASSIFY(name, expr)                                                 \
  template <class X>                                                            \
    requires __kp::fp_like<X>                                                     \
  __KP_INLINE __kp::bools_of_t<X> name(X x) {                             \
    __kp::bools_of_t<X> r;                                                        \
    for (int i = 0; i < __kp::lanes_v<X>; ++i) {                                  \
      auto v = __kp::calc_t<__kp::elem_t<X>>(__kp::lane(x, i));                       \
      bool b = (expr);                                                          \
      if constexpr (__kp::vinfo<X>::is_vector)                                    \
        r[i] = b;                                                               \
      else                                                                      \
        r = b;                                                                  \
    }                                                                           \
    return r;                                                                   \
  }
__KP_CLASSIFY(isnan, v != v)
__KP_CLASSIFY(isinf, __builtin_isinf(v))
__KP_CLASSIFY(isfinite, __builtin_isfinite(v))
__KP_CLASSIFY(isnormal, __builtin_isfinite(v) &&
                          __builtin_fabs(double(v)) >= double(numeric_limits<__kp::elem_t<X>>::min()))
__KP_CLASSIFY(signbit, __builtin_signbit(v))
#undef __KP_CLASSIFY

template <class A, class B, class R = __kp::common2_t<A, B>>
  requires __kp::fp_like<R>
__KP_INLINE __kp::bools_of_t<R> isunordered(A a, B b) {
  R x = __kp::as_arg<R>(a), y = __kp::as_arg<R>(b);
  return isnan(x) || isnan(y);
}
template <class A, class B, class R = __kp::common2_t<A, B>>
  requires __kp::fp_like<R>
__KP_INLINE __kp::bools_of_t<R> isordered(A a, B b) {
  return !isunordered(a, b);
}

}  // namespace metal
