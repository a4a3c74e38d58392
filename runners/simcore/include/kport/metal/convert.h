// Metal constructor and cast semantics. The source rewrite turns `float4(a, b)` into
// __kp::make<float4>(a, b) and `(float4)x` / static_cast<float4>(x) into __kp::convert<float4>(x).
#pragma once
#pragma clang system_header
#include "packed.h"

namespace __kp {

// Specialised in matrix.h; make/convert hand matrices to their constructors.
template <class X>
inline constexpr bool is_matrix_v = false;

// Value conversion of one scalar. half <-> bfloat goes through float: Metal allows the explicit
// cast, clang does not.
template <class To, class From>
__KP_INLINE constexpr To cvt(const From& x) {
  if constexpr (is_same_v<To, bool>)
    return x != From(0);
  else if constexpr ((is_same_v<To, bfloat> && is_same_v<From, half>) ||
                     (is_same_v<To, half> && is_same_v<From, bfloat>))
    return To(float(x));
  else
    return static_cast<To>(x);
}

template <class V, class E, int... I>
__KP_INLINE constexpr V from_lanes(const E* b, int_seq<int, I...>) {
  if constexpr (ext_vector<V>)
    return V{b[I]...};
  else
    return V(b[I]...);
}

template <class E, class A>
__KP_INLINE constexpr void put_lanes(E* buf, int& k, const A& a) {
  for (int i = 0; i < lanes_v<A>; ++i) buf[k++] = cvt<E>(lane(a, i));
}

template <class V, class X>
__KP_INLINE constexpr V convert(const X& x);

template <class A>
inline constexpr bool make_arg_ok = arith_scalar<A> || vinfo<A>::is_vector;

// The address-space check unit (runners/metal_sim/spaces.py) gives device and threadgroup
// objects clang's address spaces, where a class object (a packed vector, a matrix) cannot bind
// a `const A&` of the generic space or call a member, as it can in MSL. The check only
// type-checks, so there an argument of another space is read as a generic one; everywhere
// else __KP_GENERIC is the value itself.
template <class T>
struct generic_space { using type = T; };
#if __KP_ADDRESS_SPACES
template <class T, int N>
struct generic_space<__attribute__((address_space(N))) T> { using type = T; };
#endif
template <class A>
inline constexpr bool in_space_v = !is_same_v<A, typename generic_space<A>::type>;
#define __KP_GENERIC(A, x) (*(const typename generic_space<A>::type*)&(x))

// Metal vector constructor: one scalar splats; otherwise the lanes of all arguments, in order,
// must add up to exactly the lane count of V. Each lane is value-converted.
template <class V, class... A>
__KP_INLINE constexpr V make(const A&... a) {
  if constexpr ((in_space_v<A> || ...)) {
    return make<V>(__KP_GENERIC(A, a)...);
  } else if constexpr (is_matrix_v<V>) {
    return V(a...);
  } else if constexpr (is_packed_v<V>) {
    return V(make<typename V::vector_type>(a...));
  } else if constexpr (!vinfo<V>::is_vector) {
    // Any other type (a template parameter the rewrite could not see through): a plain
    // functional cast or constructor call.
    if constexpr (sizeof...(A) == 1)
      return convert<V>(a...);
    else
      return V(a...);
  } else {
    using E = elem_t<V>;
    constexpr int N = lanes_v<V>;
    static_assert((make_arg_ok<A> && ...),
                  "Metal vector constructor: arguments must be scalars or vectors");
    if constexpr (sizeof...(A) == 0) {
      return V(E(0));
    } else if constexpr (sizeof...(A) == 1 && (!vinfo<A>::is_vector && ...)) {
      return V(cvt<E>(a...));
    } else {
      static_assert((lanes_v<A> + ... + 0) == N,
                    "Metal vector constructor: the arguments' components must add up to exactly "
                    "the lane count of the vector (e.g. float4(float3, float) or float4(float2, "
                    "float2)); use a swizzle such as v.xyz to drop lanes");
      E buf[N] = {};
      int k = 0;
      (put_lanes(buf, k, a), ...);
      return from_lanes<V>(buf, make_seq<N>{});
    }
  }
}

// Metal cast: value conversion of a scalar (splat), of a vector with the same lane count, or of
// a matrix; never a bit-cast (that is as_type). Any other V behaves as the C-style cast, so the
// rewrite may send every cast to a template parameter type here.
// Note: clang's `a < b` is an int mask of -1/0, so convert<float4>(a < b) gives -1.0 where Metal's
// bool4 gives 1.0; store the comparison in a bool4 first, or use select().
template <class V, class X>
__KP_INLINE constexpr V convert(const X& x) {
  if constexpr (in_space_v<X>) {
    return convert<V>(__KP_GENERIC(X, x));
  } else if constexpr (is_matrix_v<V>) {
    return V(x);
  } else if constexpr (is_packed_v<V>) {
    return V(convert<typename V::vector_type>(x));
  } else if constexpr (!vinfo<V>::is_vector) {
    static_assert(!vinfo<X>::is_vector, "Metal cast: a vector cannot be cast to a scalar");
    if constexpr (arith_scalar<V> && arith_scalar<X>)
      return cvt<V>(x);
    else
      return (V)x;  // pointers, enums, structs: exactly the C-style cast
  } else if constexpr (!vinfo<X>::is_vector) {
    static_assert(arith_scalar<X>, "Metal cast: the operand must be a scalar or a vector");
    return V(cvt<elem_t<V>>(x));
  } else {
    static_assert(lanes_v<X> == lanes_v<V>,
                  "Metal cast: vector conversions need the same lane count (use a swizzle)");
    using E = elem_t<V>;
    // half <-> bfloat lane by lane through float (cvt): clang's x86 back end cannot convert
    // a __bf16 vector to _Float16 directly ("Do not know how to soft promote this operator's
    // operand"), a crash llama.cpp's bfloat4x4 -> half4x4 dequantizer hit
    constexpr bool half_bfloat = (is_same_v<E, half> && is_same_v<elem_t<X>, bfloat>) ||
                                 (is_same_v<E, bfloat> && is_same_v<elem_t<X>, half>);
    if constexpr (ext_vector<V> && ext_vector<X> && !is_same_v<E, bool> &&
                  !is_same_v<elem_t<X>, bool> && !half_bfloat) {
      return __builtin_convertvector(x, V);
    } else {
      E buf[lanes_v<V>] = {};
      int k = 0;
      put_lanes(buf, k, x);
      return from_lanes<V>(buf, make_seq<lanes_v<V>>{});
    }
  }
}

// A value as type R, splatting a scalar across R's lanes: used by the math functions to bring
// mixed scalar/vector arguments to one type.
template <class R, class X>
__KP_INLINE constexpr R as_arg(const X& x) {
  if constexpr (is_same_v<R, X>)
    return x;
  else
    return convert<R>(unpack(x));
}

}  // namespace __kp
