// Metal scalar and vector types: 2/3/4-lane ext vectors (native swizzles .xyzw/.rgba), bool
// vectors, as_type. Vector comparisons in clang yield int masks (-1/0); bool vectors accept them.
#pragma once
#pragma clang system_header
#include "traits.h"

#define __KP_VECTOR_TYPEDEFS(T, name)                            \
  typedef T name##2 __attribute__((ext_vector_type(2)));       \
  typedef T name##3 __attribute__((ext_vector_type(3)));       \
  typedef T name##4 __attribute__((ext_vector_type(4)));
__KP_VECTOR_TYPEDEFS(float, float)
__KP_VECTOR_TYPEDEFS(half, half)
__KP_VECTOR_TYPEDEFS(bfloat, bfloat)
__KP_VECTOR_TYPEDEFS(int, int)
__KP_VECTOR_TYPEDEFS(uint, uint)
__KP_VECTOR_TYPEDEFS(short, short)
__KP_VECTOR_TYPEDEFS(ushort, ushort)
__KP_VECTOR_TYPEDEFS(char, char)
__KP_VECTOR_TYPEDEFS(uchar, uchar)
__KP_VECTOR_TYPEDEFS(long, long)
__KP_VECTOR_TYPEDEFS(ulong, ulong)
#undef __KP_VECTOR_TYPEDEFS

namespace __kp {

// Integer mask vectors (what `a < b` yields) and clang bool vectors convert to bool vectors.
template <class M, int N>
concept mask_of = ext_vector<M> && lanes_v<M> == N && __is_integral(elem_t<M>);

template <int N>
struct boolvec_storage;
template <>
struct boolvec_storage<2> {
  union {
    bool v[2];
    struct { bool x, y; };
    struct { bool r, g; };
  };
};
template <>
struct boolvec_storage<3> {
  union {
    bool v[3];
    struct { bool x, y, z; };
    struct { bool r, g, b; };
  };
};
template <>
struct boolvec_storage<4> {
  union {
    bool v[4];
    struct { bool x, y, z, w; };
    struct { bool r, g, b, a; };
  };
};

// Metal boolN: one byte per lane (sizes 2/4/4 as in Metal); component access and indexing.
// Swizzles of bool vectors are not provided.
template <int N>
struct alignas(N == 2 ? 2 : 4) boolvec : boolvec_storage<N> {
  boolvec() = default;
  constexpr boolvec(bool s) {
    for (int i = 0; i < N; ++i) this->v[i] = s;
  }
  template <class M>
    requires mask_of<M, N>
  constexpr boolvec(M m) {
    for (int i = 0; i < N; ++i) this->v[i] = m[i] != 0;
  }
  template <class... B>
    requires(sizeof...(B) == N && N > 1 && (__is_integral(B) && ...))
  constexpr boolvec(B... b) {
    int i = 0;
    ((this->v[i++] = b != 0), ...);
  }
  constexpr bool& operator[](int i) { return this->v[i]; }
  constexpr bool operator[](int i) const { return this->v[i]; }

  friend constexpr boolvec operator!(boolvec a) {
    for (int i = 0; i < N; ++i) a.v[i] = !a.v[i];
    return a;
  }
#define __KP_BOOLVEC_OP(op)                                         \
  friend constexpr boolvec operator op(boolvec a, boolvec b) {    \
    for (int i = 0; i < N; ++i) a.v[i] = a.v[i] op b.v[i];        \
    return a;                                                     \
  }
  __KP_BOOLVEC_OP(&&)
  __KP_BOOLVEC_OP(||)
  __KP_BOOLVEC_OP(&)
  __KP_BOOLVEC_OP(|)
  __KP_BOOLVEC_OP(^)
  __KP_BOOLVEC_OP(==)
  __KP_BOOLVEC_OP(!=)
#undef __KP_BOOLVEC_OP
  constexpr boolvec& operator&=(boolvec b) { return *this = *this & b; }
  constexpr boolvec& operator|=(boolvec b) { return *this = *this | b; }
  constexpr boolvec& operator^=(boolvec b) { return *this = *this ^ b; }
};

template <int N>
struct vinfo<boolvec<N>> {
  using elem = bool;
  static constexpr int lanes = N;
  static constexpr bool is_vector = true;
  static constexpr bool is_ext = false;
};

// Read lane i of a scalar (the scalar itself) or of any vector kind.
template <class X>
constexpr elem_t<X> lane(const X& x, int i) {
  if constexpr (vinfo<X>::is_vector)
    return x[i];
  else
    return (void)i, x;
}

// Lane-wise truth of a condition: bool scalar, bool vector, int mask or clang bool vector.
template <class C>
constexpr bool truth(const C& c, int i) {
  if constexpr (vinfo<C>::is_vector)
    return c[i] != 0;
  else
    return (void)i, c != 0;
}

}  // namespace __kp

typedef __kp::boolvec<2> bool2;
typedef __kp::boolvec<3> bool3;
typedef __kp::boolvec<4> bool4;
static_assert(sizeof(bool2) == 2 && sizeof(bool3) == 4 && sizeof(bool4) == 4);
static_assert(sizeof(float3) == 16 && alignof(float3) == 16 && sizeof(half3) == 8);

namespace metal {

using ::half;
using ::bfloat;
using ::uint;
using ::ushort;
using ::uchar;
using ::ulong;

// Reinterpret the bits of x as T (Metal as_type); sizes must match.
template <class T, class U>
__KP_INLINE constexpr T as_type(const U& x) {
  static_assert(sizeof(T) == sizeof(U),
                "as_type<T>(x): Metal requires sizeof(T) == sizeof(x) (e.g. float3 is 16 bytes, "
                "packed_float3 is 12)");
  return __builtin_bit_cast(T, x);
}

}  // namespace metal
