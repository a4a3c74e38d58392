// Metal packed vectors: packed_float3 is 12 bytes with 4-byte alignment (float3 is 16/16).
// They give component access and indexing, convert to and from the aligned vector, and take
// part in + - * / by converting to it. Swizzles need a conversion first: float3(p).xy.
#pragma once
#pragma clang system_header
#include "types.h"

namespace __kp {

template <class T, int N>
struct packed_storage;
template <class T>
struct packed_storage<T, 2> {
  union {
    T v[2];
    struct { T x, y; };
    struct { T r, g; };
  };
};
template <class T>
struct packed_storage<T, 3> {
  union {
    T v[3];
    struct { T x, y, z; };
    struct { T r, g, b; };
  };
};
template <class T>
struct packed_storage<T, 4> {
  union {
    T v[4];
    struct { T x, y, z, w; };
    struct { T r, g, b, a; };
  };
};

template <class T, int N>
struct packed;
template <class X>
inline constexpr bool is_packed_v = false;
template <class T, int N>
inline constexpr bool is_packed_v<packed<T, N>> = true;

// A packed vector as its aligned vector; anything else unchanged.
template <class X>
constexpr auto unpack(const X& x) {
  if constexpr (is_packed_v<X>)
    return typename X::vector_type(x);
  else
    return x;
}

template <class T, int N>
struct packed : packed_storage<T, N> {
  using vector_type = metal::vec<T, N>;

  packed() = default;
  constexpr packed(vector_type a) {
    for (int i = 0; i < N; ++i) this->v[i] = a[i];
  }
  template <class... A>
    requires(sizeof...(A) == N && (arith_scalar<A> && ...))
  constexpr packed(A... a) {
    int i = 0;
    ((this->v[i++] = T(a)), ...);
  }
  constexpr operator vector_type() const { return to_vector(make_seq<N>{}); }
  template <int... I>
  constexpr vector_type to_vector(int_seq<int, I...>) const {
    return vector_type{this->v[I]...};
  }
  constexpr T& operator[](int i) { return this->v[i]; }
  constexpr const T& operator[](int i) const { return this->v[i]; }

  template <class B>
  constexpr packed& operator+=(const B& b) { return *this = vector_type(*this) + unpack(b); }
  template <class B>
  constexpr packed& operator-=(const B& b) { return *this = vector_type(*this) - unpack(b); }
  template <class B>
  constexpr packed& operator*=(const B& b) { return *this = vector_type(*this) * unpack(b); }
  template <class B>
  constexpr packed& operator/=(const B& b) { return *this = vector_type(*this) / unpack(b); }
};

template <class T, int N>
struct vinfo<packed<T, N>> {
  using elem = T;
  static constexpr int lanes = N;
  static constexpr bool is_vector = true;
  static constexpr bool is_ext = false;
};

#define __KP_PACKED_BINOP(op)                                                         \
  template <class A, class B>                                                       \
    requires(is_packed_v<A> || is_packed_v<B>)                                      \
  constexpr auto operator op(const A& a, const B& b) -> decltype(unpack(a) op unpack(b)) { \
    return unpack(a) op unpack(b);                                                  \
  }
__KP_PACKED_BINOP(+)
__KP_PACKED_BINOP(-)
__KP_PACKED_BINOP(*)
__KP_PACKED_BINOP(/)
__KP_PACKED_BINOP(==)
__KP_PACKED_BINOP(!=)
__KP_PACKED_BINOP(<)
__KP_PACKED_BINOP(>)
__KP_PACKED_BINOP(<=)
__KP_PACKED_BINOP(>=)
#undef __KP_PACKED_BINOP
template <class T, int N>
constexpr metal::vec<T, N> operator-(const packed<T, N>& a) {
  return -metal::vec<T, N>(a);
}

}  // namespace __kp

#define __KP_PACKED_TYPEDEFS(T, name)        \
  typedef __kp::packed<T, 2> packed_##name##2; \
  typedef __kp::packed<T, 3> packed_##name##3; \
  typedef __kp::packed<T, 4> packed_##name##4;
__KP_PACKED_TYPEDEFS(float, float)
__KP_PACKED_TYPEDEFS(half, half)
__KP_PACKED_TYPEDEFS(bfloat, bfloat)
__KP_PACKED_TYPEDEFS(int, int)
__KP_PACKED_TYPEDEFS(uint, uint)
__KP_PACKED_TYPEDEFS(short, short)
__KP_PACKED_TYPEDEFS(ushort, ushort)
__KP_PACKED_TYPEDEFS(char, char)
__KP_PACKED_TYPEDEFS(uchar, uchar)
__KP_PACKED_TYPEDEFS(long, long)
__KP_PACKED_TYPEDEFS(ulong, ulong)
#undef __KP_PACKED_TYPEDEFS

static_assert(sizeof(packed_float3) == 12 && alignof(packed_float3) == 4);
static_assert(sizeof(packed_half4) == 8 && alignof(packed_half4) == 2);
