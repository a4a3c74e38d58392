// Type traits: __kp:: (what the shim itself dispatches on) and metal:: (what kernels may call).
// Built on clang builtins so that no C++ standard header is needed (compile time).
#pragma once
#pragma clang system_header
#include "../rt.h"
#include "../float_calls.h"

typedef _Float16 half;
typedef __bf16 bfloat;
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

namespace metal {
// Metal's vector template (T must be a scalar type); `vec<float, 4>` is `float4`.
template <class T, int N>
using vec = T __attribute__((ext_vector_type(N)));
}  // namespace metal

namespace __kp {

template <class T, class U>
inline constexpr bool is_same_v = __is_same(T, U);
template <bool B, class T = void>
struct enable_if {};
template <class T>
struct enable_if<true, T> { using type = T; };
template <bool B, class T, class F>
struct conditional { using type = T; };
template <class T, class F>
struct conditional<false, T, F> { using type = F; };
template <bool B, class T, class F>
using conditional_t = typename conditional<B, T, F>::type;
template <class T>
using plain_t = __remove_cvref(T);
template <class T>
struct type_is { using type = T; };
// Blocks deduction, so `atomic_fetch_add_explicit(p, 1, ...)` works on an atomic<uint>.
template <class T>
using nodeduce_t = typename type_is<T>::type;
template <class T, T... I>
struct int_seq {};
template <int N>
using make_seq = __make_integer_seq<int_seq, int, N>;

template <class T>
concept fp_scalar =
    is_same_v<T, float> || is_same_v<T, half> || is_same_v<T, bfloat> || is_same_v<T, double>;
template <class T>
concept int_scalar = __is_integral(T) && !is_same_v<T, bool>;
template <class T>
concept arith_scalar = fp_scalar<T> || __is_integral(T);

// Lane structure of a value: scalars have 1 lane; ext vectors, bool vectors and packed vectors N.
// Shim types specialise this (bool vectors in types.h, packed vectors in packed.h).
template <class X>
struct vinfo {
  using elem = X;
  static constexpr int lanes = 1;
  static constexpr bool is_vector = false;  // any vector kind
  static constexpr bool is_ext = false;     // a clang ext_vector_type
};
template <class T, int N>
struct vinfo<T __attribute__((ext_vector_type(N)))> {
  using elem = T;
  static constexpr int lanes = N;
  static constexpr bool is_vector = true;
  static constexpr bool is_ext = true;
};
template <class X>
using elem_t = typename vinfo<X>::elem;
template <class X>
inline constexpr int lanes_v = vinfo<X>::lanes;
template <class X>
concept ext_vector = vinfo<X>::is_ext;

// Floating-point scalars and ext vectors of float/half/bfloat (Metal has no double vectors).
template <class X>
concept fp_like = fp_scalar<X> || (ext_vector<X> && fp_scalar<elem_t<X>> &&
                                   !is_same_v<elem_t<X>, double>);
template <class X>
concept int_like = int_scalar<X> || (ext_vector<X> && int_scalar<elem_t<X>>);
template <class X>
concept num_like = fp_like<X> || int_like<X>;

// The precision a lane is computed in: float for half/bfloat/float, double for double.
template <class E>
using calc_t = conditional_t<is_same_v<E, double>, double, float>;

template <class T>
T&& declval() noexcept;

// Bases of metal::numeric_limits.
template <class T>
struct int_limits {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = T(-1) < T(0);
  static constexpr bool is_integer = true;
  static constexpr bool is_exact = true;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr int digits = int(sizeof(T) * 8) - (is_signed ? 1 : 0);
  static constexpr T max() { return is_signed ? T(~(T(1) << (sizeof(T) * 8 - 1))) : T(~T(0)); }
  static constexpr T min() { return is_signed ? T(T(1) << (sizeof(T) * 8 - 1)) : T(0); }
  static constexpr T lowest() { return min(); }
  static constexpr T epsilon() { return T(0); }
  static constexpr T infinity() { return T(0); }
  static constexpr T quiet_NaN() { return T(0); }
};
// Floating types described by their bit patterns: (storage type, max, min normal, epsilon,
// denorm_min, infinity, quiet NaN, mantissa digits).
template <class T, class Bits, Bits kMax, Bits kMin, Bits kEps, Bits kDen, Bits kInf, Bits kNan,
          int kDigits>
struct float_limits {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = kDigits;
  static constexpr T max() { return __builtin_bit_cast(T, kMax); }
  static constexpr T min() { return __builtin_bit_cast(T, kMin); }
  static constexpr T lowest() { return -max(); }
  static constexpr T epsilon() { return __builtin_bit_cast(T, kEps); }
  static constexpr T denorm_min() { return __builtin_bit_cast(T, kDen); }
  static constexpr T infinity() { return __builtin_bit_cast(T, kInf); }
  static constexpr T quiet_NaN() { return __builtin_bit_cast(T, kNan); }
};
}  // namespace __kp

namespace metal {

// ---- <metal_type_traits> subset -----------------------------------------------------------------
template <class T, T v>
struct integral_constant {
  static constexpr T value = v;
  using value_type = T;
  using type = integral_constant;
  constexpr operator T() const { return v; }
  constexpr T operator()() const { return v; }
};
template <bool B>
using bool_constant = integral_constant<bool, B>;
using true_type = bool_constant<true>;
using false_type = bool_constant<false>;

template <class T, class U>
struct is_same : bool_constant<__is_same(T, U)> {};
template <class T, class U>
inline constexpr bool is_same_v = __is_same(T, U);
using __kp::conditional;
using __kp::conditional_t;
using __kp::enable_if;
template <bool B, class T = void>
using enable_if_t = typename enable_if<B, T>::type;
template <class...>
using void_t = void;
using __kp::declval;

template <class T>
struct is_floating_point : bool_constant<__kp::fp_scalar<__remove_cv(T)>> {};
template <class T>
inline constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T>
struct is_integral : bool_constant<__is_integral(__remove_cv(T))> {};
template <class T>
inline constexpr bool is_integral_v = is_integral<T>::value;
template <class T>
struct is_arithmetic : bool_constant<is_integral_v<T> || is_floating_point_v<T>> {};
template <class T>
inline constexpr bool is_arithmetic_v = is_arithmetic<T>::value;
template <class T>
struct is_signed : bool_constant<is_floating_point_v<T> || (is_integral_v<T> && T(-1) < T(0))> {};
template <class T>
inline constexpr bool is_signed_v = is_signed<T>::value;
template <class T>
struct is_unsigned : bool_constant<is_integral_v<T> && T(0) < T(-1)> {};
template <class T>
inline constexpr bool is_unsigned_v = is_unsigned<T>::value;
template <class T>
struct is_scalar : bool_constant<is_arithmetic_v<T> || __is_pointer(T) || __is_enum(T)> {};
template <class T>
inline constexpr bool is_scalar_v = is_scalar<T>::value;
template <class T>
struct is_vector : bool_constant<__kp::vinfo<__remove_cv(T)>::is_vector> {};
template <class T>
inline constexpr bool is_vector_v = is_vector<T>::value;
template <class T>
struct vec_elements : integral_constant<int, __kp::vinfo<__remove_cv(T)>::lanes> {};
template <class T>
struct is_pointer : bool_constant<__is_pointer(T)> {};
template <class T>
inline constexpr bool is_pointer_v = __is_pointer(T);
template <class T>
struct is_void : bool_constant<__is_void(T)> {};
template <class T>
inline constexpr bool is_void_v = __is_void(T);
template <class From, class To>
struct is_convertible : bool_constant<__is_convertible(From, To)> {};
template <class From, class To>
inline constexpr bool is_convertible_v = __is_convertible(From, To);
template <class T>
inline constexpr bool is_trivially_copyable_v = __is_trivially_copyable(T);

#define __KP_TYPE_TRANSFORM(name, expr) \
  template <class T>                  \
  struct name {                       \
    using type = expr;                \
  };                                  \
  template <class T>                  \
  using name##_t = expr;
__KP_TYPE_TRANSFORM(remove_cv, __remove_cv(T))
__KP_TYPE_TRANSFORM(remove_const, __remove_const(T))
__KP_TYPE_TRANSFORM(remove_volatile, __remove_volatile(T))
__KP_TYPE_TRANSFORM(remove_reference, __remove_reference_t(T))
__KP_TYPE_TRANSFORM(remove_cvref, __remove_cvref(T))
__KP_TYPE_TRANSFORM(remove_pointer, __remove_pointer(T))
__KP_TYPE_TRANSFORM(add_const, const T)
__KP_TYPE_TRANSFORM(decay, __decay(T))
__KP_TYPE_TRANSFORM(make_signed, __make_signed(T))
__KP_TYPE_TRANSFORM(make_unsigned, __make_unsigned(T))
// Address spaces are erased before compilation, so removing one is the identity.
__KP_TYPE_TRANSFORM(remove_addrspace, T)
#undef __KP_TYPE_TRANSFORM

// ---- numeric_limits ----------------------------------------------------------------------------
template <class T>
struct numeric_limits {
  static constexpr bool is_specialized = false;
};

template <> struct numeric_limits<bool> : __kp::int_limits<bool> {
  static constexpr bool max() { return true; }
  static constexpr bool min() { return false; }
  static constexpr bool lowest() { return false; }
};
template <> struct numeric_limits<char> : __kp::int_limits<char> {};
template <> struct numeric_limits<signed char> : __kp::int_limits<signed char> {};
template <> struct numeric_limits<unsigned char> : __kp::int_limits<unsigned char> {};
template <> struct numeric_limits<short> : __kp::int_limits<short> {};
template <> struct numeric_limits<unsigned short> : __kp::int_limits<unsigned short> {};
template <> struct numeric_limits<int> : __kp::int_limits<int> {};
template <> struct numeric_limits<unsigned int> : __kp::int_limits<unsigned int> {};
template <> struct numeric_limits<long> : __kp::int_limits<long> {};
template <> struct numeric_limits<unsigned long> : __kp::int_limits<unsigned long> {};
template <> struct numeric_limits<long long> : __kp::int_limits<long long> {};
template <> struct numeric_limits<unsigned long long> : __kp::int_limits<unsigned long long> {};

template <> struct numeric_limits<float>
    : __kp::float_limits<float, uint32_t, 0x7f7fffffu, 0x00800000u, 0x34000000u, 1u, 0x7f800000u,
                      0x7fc00000u, 24> {};
template <> struct numeric_limits<half>
    : __kp::float_limits<half, uint16_t, 0x7bff, 0x0400, 0x1400, 1, 0x7c00, 0x7e00, 11> {};
template <> struct numeric_limits<bfloat>
    : __kp::float_limits<bfloat, uint16_t, 0x7f7f, 0x0080, 0x3c00, 1, 0x7f80, 0x7fc0, 8> {};
template <> struct numeric_limits<double>
    : __kp::float_limits<double, uint64_t, 0x7fefffffffffffffull, 0x0010000000000000ull,
                      0x3cb0000000000000ull, 1ull, 0x7ff0000000000000ull,
                      0x7ff8000000000000ull, 53> {};
template <class T> struct numeric_limits<const T> : numeric_limits<T> {};

// Metal's fixed-size array (metal::array<T, N>).
template <class T, size_t N>
struct array {
  T elems[N ? N : 1];
  constexpr T& operator[](size_t i) { return elems[i]; }
  constexpr const T& operator[](size_t i) const { return elems[i]; }
  static constexpr size_t size() { return N; }
  constexpr T* data() { return elems; }
  constexpr const T* data() const { return elems; }
  constexpr T* begin() { return elems; }
  constexpr T* end() { return elems + N; }
  constexpr const T* begin() const { return elems; }
  constexpr const T* end() const { return elems + N; }
};

}  // namespace metal
