// Metal relational functions (<metal_relational>): all/any over bool vectors or comparison masks,
// select, and the floating classification tests (bool, or boolN for vectors).
#pragma once
#pragma clang system_header
#include "arith.h"

namespace kp {

template <class C>
concept condition = is_same_v<C, bool> ||
                    (vinfo<C>::is_vector && !vinfo<C>::is_ext && is_same_v<elem_t<C>, bool>) ||
                    (ext_vector<C> && __is_integral(elem_t<C>));

}  // namespace kp

namespace metal {

// True when every lane of a bool vector (or of a comparison mask such as `a < b`) is true.
template <class C>
  requires kp::condition<C>
KP_INLINE constexpr bool all(C c) {
  for (int i = 0; i < kp::lanes_v<C>; ++i)
    if (!kp::truth(c, i)) return false;
  return true;
}
template <class C>
  requires kp::condition<C>
KP_INLINE constexpr bool any(C c) {
  for (int i = 0; i < kp::lanes_v<C>; ++i)
    if (kp::truth(c, i)) return true;
  return false;
}

// select(a, b, c): b where c is true, a elsewhere (lane-wise for vector conditions). A scalar
// condition may be any integer (ggml: select(1, -1, bits & mask)).
template <class A, class B, class C, class R = kp::common2_t<A, B>>
  requires(!kp::is_same_v<R, void> &&
           ((kp::condition<C> && (kp::lanes_v<C> == 1 || kp::lanes_v<C> == kp::lanes_v<R>)) ||
            (!kp::vinfo<R>::is_vector && kp::arith_scalar<C>)))
KP_INLINE R select(A a, B b, C c) {
  R ra = kp::as_arg<R>(a), rb = kp::as_arg<R>(b);
  if constexpr (kp::vinfo<R>::is_vector) {
    R r;
    for (int i = 0; i < kp::lanes_v<R>; ++i) r[i] = kp::truth(c, i) ? rb[i] : ra[i];
    return r;
  } else {
    return kp::truth(c, 0) ? rb : ra;
  }
}
template <class A, class B>
  requires(!kp::vinfo<A>::is_vector && kp::is_same_v<A, B> && !kp::arith_scalar<A>)
KP_INLINE A select(A a, B b, bool c) {
  return c ? b : a;
}

#define KP_CLASSIFY(name, expr)                                                 \
  template <class X>                                                            \
    requires kp::fp_like<X>                                                     \
  KP_INLINE kp::bools_of_t<X> name(X x) {                             \
    kp::bools_of_t<X> r;                                                        \
    for (int i = 0; i < kp::lanes_v<X>; ++i) {                                  \
      auto v = kp::calc_t<kp::elem_t<X>>(kp::lane(x, i));                       \
      bool b = (expr);                                                          \
      if constexpr (kp::vinfo<X>::is_vector)                                    \
        r[i] = b;                                                               \
      else                                                                      \
        r = b;                                                                  \
    }                                                                           \
    return r;                                                                   \
  }
KP_CLASSIFY(isnan, v != v)
KP_CLASSIFY(isinf, __builtin_isinf(v))
KP_CLASSIFY(isfinite, __builtin_isfinite(v))
KP_CLASSIFY(isnormal, __builtin_isfinite(v) &&
                          __builtin_fabs(double(v)) >= double(numeric_limits<kp::elem_t<X>>::min()))
KP_CLASSIFY(signbit, __builtin_signbit(v))
#undef KP_CLASSIFY

template <class A, class B, class R = kp::common2_t<A, B>>
  requires kp::fp_like<R>
KP_INLINE kp::bools_of_t<R> isunordered(A a, B b) {
  R x = kp::as_arg<R>(a), y = kp::as_arg<R>(b);
  return isnan(x) || isnan(y);
}
template <class A, class B, class R = kp::common2_t<A, B>>
  requires kp::fp_like<R>
KP_INLINE kp::bools_of_t<R> isordered(A a, B b) {
  return !isunordered(a, b);
}

}  // namespace metal
