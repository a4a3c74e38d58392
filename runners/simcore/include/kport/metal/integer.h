// Metal integer functions (<metal_integer>), lane-wise on vectors. min/max/clamp/abs live in
// math.h since they also take floating lanes.
#pragma once
#pragma clang system_header
#include "math.h"

namespace __kp {

template <class E>
inline constexpr int bit_width_v = int(sizeof(E) * 8);
template <class E>
using ubits_t = bits_t<E>;
template <class E>
using wide_t = conditional_t<(sizeof(E) < 8), conditional_t<(E(-1) < E(0)), int64_t, uint64_t>,
                             conditional_t<(E(-1) < E(0)), __int128, unsigned __int128>>;

template <class E>
__KP_INLINE constexpr E popcount1(E x) {
  return E(__builtin_popcountg(ubits_t<E>(x)));
}
// clz(0) and ctz(0) give the bit width. unconfirmed: Metal's result for 0.
template <class E>
__KP_INLINE constexpr E clz1(E x) {
  return E(__builtin_clzg(ubits_t<E>(x), bit_width_v<E>));
}
template <class E>
__KP_INLINE constexpr E ctz1(E x) {
  return E(__builtin_ctzg(ubits_t<E>(x), bit_width_v<E>));
}
template <class E>
__KP_INLINE constexpr E reverse1(E x) {
  using U = ubits_t<E>;
  U u = U(x), r = 0;
  for (int i = 0; i < bit_width_v<E>; ++i) r = U((r << 1) | ((u >> i) & 1));
  return E(r);
}
// `bits` bits of x starting at `offset`, sign-extended for signed lanes.
// unconfirmed: Metal leaves offset + bits > width undefined; the bits past the top read as 0.
template <class E>
__KP_INLINE constexpr E extract1(E x, uint offset, uint bits) {
  using U = ubits_t<E>;
  constexpr uint W = bit_width_v<E>;
  if (bits == 0 || offset >= W) return E(0);
  U field = U(U(x) >> offset);
  if (bits < W) field = U(field & U((U(1) << bits) - 1));
  if constexpr (E(-1) < E(0)) {
    if (bits < W && ((field >> (bits - 1)) & 1)) field = U(field | U(~U(0) << bits));
  }
  return E(field);
}
template <class E>
__KP_INLINE constexpr E insert1(E base, E insert, uint offset, uint bits) {
  using U = ubits_t<E>;
  constexpr uint W = bit_width_v<E>;
  if (bits == 0 || offset >= W) return base;
  U mask = bits >= W ? U(~U(0)) : U((U(1) << bits) - 1);
  mask = U(mask << offset);
  return E((U(base) & U(~mask)) | (U(U(insert) << offset) & mask));
}
template <class E>
__KP_INLINE constexpr E mulhi1(E x, E y) {
  return E((wide_t<E>(x) * wide_t<E>(y)) >> bit_width_v<E>);
}
// mul24 uses the low 24 bits of each operand (sign-extended for int). unconfirmed: Metal's
// result for operands outside 24 bits.
template <class E>
__KP_INLINE constexpr E mul24_1(E x, E y) {
  int64_t a = int64_t(x) & 0xFFFFFF, b = int64_t(y) & 0xFFFFFF;
  if constexpr (E(-1) < E(0)) {
    a = (a ^ 0x800000) - 0x800000;
    b = (b ^ 0x800000) - 0x800000;
  }
  return E(uint32_t(uint64_t(a * b)));
}
template <class E>
__KP_INLINE constexpr E hadd1(E x, E y) {
  return E((wide_t<E>(x) + wide_t<E>(y)) >> 1);
}
template <class E>
__KP_INLINE constexpr E rhadd1(E x, E y) {
  return E((wide_t<E>(x) + wide_t<E>(y) + 1) >> 1);
}
template <class E>
__KP_INLINE constexpr E absdiff1(E x, E y) {
  return x > y ? E(ubits_t<E>(x) - ubits_t<E>(y)) : E(ubits_t<E>(y) - ubits_t<E>(x));
}
// Lanes under 64 bits saturate through int64_t, which holds any sum or difference of two.
template <class E>
__KP_INLINE constexpr E sat1(int64_t v) {
  constexpr int64_t lo = metal::numeric_limits<E>::min(), hi = metal::numeric_limits<E>::max();
  return E(v < lo ? lo : v > hi ? hi : v);
}
template <class E>
__KP_INLINE constexpr E addsat1(E x, E y) {
  if constexpr (sizeof(E) < 8) {
    return sat1<E>(int64_t(x) + int64_t(y));
  } else {
    E r;
    if (!__builtin_add_overflow(x, y, &r)) return r;
    return (E(-1) < E(0) && x < E(0)) ? metal::numeric_limits<E>::min()
                                       : metal::numeric_limits<E>::max();
  }
}
template <class E>
__KP_INLINE constexpr E subsat1(E x, E y) {
  if constexpr (sizeof(E) < 8) {
    return sat1<E>(int64_t(x) - int64_t(y));
  } else {
    E r;
    if (!__builtin_sub_overflow(x, y, &r)) return r;
    if constexpr (E(-1) < E(0))
      return x < E(0) ? metal::numeric_limits<E>::min() : metal::numeric_limits<E>::max();
    else
      return E(0);
  }
}
// Rotate left by n modulo the width (Metal: bits shifted out on the left come back on the right).
template <class E>
__KP_INLINE constexpr E rotate1(E v, E n) {
  using U = ubits_t<E>;
  constexpr int W = bit_width_v<E>;
  int s = int(U(n) % U(W));
  U u = U(v);
  return s == 0 ? v : E(U(u << s) | U(u >> (W - s)));
}

}  // namespace __kp

namespace metal {

#define __KP_INT_UNARY(name, fn)                                            \
  template <class X>                                                      \
    requires __kp::int_like<X>                                              \
  __KP_INLINE X name(X x) {                                                 \
    return __kp::map_e<X>(__kp::fn<__kp::elem_t<X>>, x);                        \
  }
__KP_INT_UNARY(popcount, popcount1)
__KP_INT_UNARY(clz, clz1)
__KP_INT_UNARY(ctz, ctz1)
__KP_INT_UNARY(reverse_bits, reverse1)
#undef __KP_INT_UNARY

#define __KP_INT_BINARY(name, fn)                                                     \
  template <class A, class B, class R = __kp::common2_t<A, B>>                        \
    requires __kp::int_like<R>                                                        \
  __KP_INLINE R name(A a, B b) {                                                      \
    return __kp::map_e<R>(__kp::fn<__kp::elem_t<R>>, a, b);                               \
  }
__KP_INT_BINARY(mulhi, mulhi1)
__KP_INT_BINARY(mul24, mul24_1)
__KP_INT_BINARY(hadd, hadd1)
__KP_INT_BINARY(rhadd, rhadd1)
__KP_INT_BINARY(absdiff, absdiff1)
__KP_INT_BINARY(addsat, addsat1)
__KP_INT_BINARY(subsat, subsat1)
__KP_INT_BINARY(rotate, rotate1)
#undef __KP_INT_BINARY

template <class A, class B, class C, class R = __kp::common3_t<A, B, C>>
  requires __kp::int_like<R>
__KP_INLINE R mad24(A a, B b, C c) {
  return mul24(__kp::as_arg<R>(a), __kp::as_arg<R>(b)) + __kp::as_arg<R>(c);
}
template <class A, class B, class C, class R = __kp::common3_t<A, B, C>>
  requires __kp::int_like<R>
__KP_INLINE R madhi(A a, B b, C c) {
  return mulhi(__kp::as_arg<R>(a), __kp::as_arg<R>(b)) + __kp::as_arg<R>(c);
}
template <class A, class B, class C, class R = __kp::common3_t<A, B, C>>
  requires __kp::int_like<R>
__KP_INLINE R madsat(A a, B b, C c) {
  using E = __kp::elem_t<R>;
  return __kp::map_e<R>(
      [](E x, E y, E z) {
        E p;
        if (__builtin_mul_overflow(x, y, &p))
          return ((x < E(0)) != (y < E(0))) ? metal::numeric_limits<E>::min()
                                            : metal::numeric_limits<E>::max();
        return __kp::addsat1(p, z);
      },
      a, b, c);
}

template <class X>
  requires __kp::int_like<X>
__KP_INLINE X extract_bits(X x, uint offset, uint bits) {
  return __kp::map_e<X>([=](__kp::elem_t<X> v) { return __kp::extract1(v, offset, bits); }, x);
}
template <class X>
  requires __kp::int_like<X>
__KP_INLINE X insert_bits(X base, __kp::nodeduce_t<X> insert, uint offset, uint bits) {
  return __kp::map_e<X>(
      [=](__kp::elem_t<X> b, __kp::elem_t<X> i) { return __kp::insert1(b, i, offset, bits); }, base,
      insert);
}

}  // namespace metal
