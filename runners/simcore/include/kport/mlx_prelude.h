// What MLX prepends to every mx.fast.metal_kernel source (mlx/backend/metal/kernels/utils.h and
// the headers it pulls in): dtype names, complex64_t, Limits, elem_to_loc, ceildiv, log1p, the
// 64-bit/bool/complex shuffles, cast_to and `using namespace metal;`. Written from MLX's documented
// behaviour, not copied.
#pragma once
#pragma clang system_header
#include "metal_stdlib.h"

using namespace metal;

typedef half float16_t;
typedef bfloat bfloat16_t;

#define MLX_MTL_PRAGMA_UNROLL _Pragma("clang loop unroll(full)")
#define MTL_CONST

inline uint16_t bfloat16_to_uint16(const bfloat16_t x) { return as_type<uint16_t>(x); }
inline bfloat16_t uint16_to_bfloat16(const uint16_t x) { return as_type<bfloat16_t>(x); }

// Elements each thread handles in MLX's elementwise kernels: 8 bytes' worth.
template <typename U>
struct WorkPerThread {
  static_assert(sizeof(U) <= 8, "Type too large");
  static constexpr int n = 8 / sizeof(U);
};

// std::conditional stand-in that MLX kernels use.
template <bool condition, typename T, typename U>
struct ConditionalType {
  using type = __kp::conditional_t<condition, T, U>;
};

// ---- complex -----------------------------------------------------------------------------------
template <typename T>
struct complex_t;
template <typename T>
inline constexpr bool is_complex_v = false;
template <typename T>
inline constexpr bool is_complex_v<complex_t<T>> = true;

template <typename T>
struct complex_t {
  using value_type = T;
  T real;
  T imag;

  constexpr complex_t() : real(0), imag(0) {}
  constexpr complex_t(T re, T im) : real(re), imag(im) {}
  // A real number: imaginary part 0.
  template <typename U>
    requires __kp::arith_scalar<U>
  constexpr complex_t(U x) : real(__kp::cvt<T>(x)), imag(0) {}
  template <typename U>
    requires(!__kp::is_same_v<U, T>)
  constexpr complex_t(complex_t<U> x) : real(__kp::cvt<T>(x.real)), imag(__kp::cvt<T>(x.imag)) {}
  // The two-lane vector form (real, imag) used by MLX's FFT kernels.
  constexpr complex_t(vec<T, 2> v) : real(v.x), imag(v.y) {}
  constexpr operator vec<T, 2>() const { return vec<T, 2>{real, imag}; }
  // To a real type: the real part.
  template <typename U>
    requires __kp::arith_scalar<U>
  constexpr operator U() const { return __kp::cvt<U>(real); }

  constexpr complex_t& operator+=(complex_t b) { return *this = *this + b; }
  constexpr complex_t& operator-=(complex_t b) { return *this = *this - b; }
  constexpr complex_t& operator*=(complex_t b) { return *this = *this * b; }
  constexpr complex_t& operator/=(complex_t b) { return *this = *this / b; }

  friend constexpr complex_t operator-(complex_t x) { return {T(-x.real), T(-x.imag)}; }
  friend constexpr complex_t operator+(complex_t a, complex_t b) {
    return {T(a.real + b.real), T(a.imag + b.imag)};
  }
  friend constexpr complex_t operator-(complex_t a, complex_t b) {
    return {T(a.real - b.real), T(a.imag - b.imag)};
  }
  friend constexpr complex_t operator*(complex_t a, complex_t b) {
    return {T(a.real * b.real - a.imag * b.imag), T(a.real * b.imag + a.imag * b.real)};
  }
  friend constexpr complex_t operator/(complex_t a, complex_t b) {
    T den = b.real * b.real + b.imag * b.imag;
    return {T((a.real * b.real + a.imag * b.imag) / den),
            T((a.imag * b.real - a.real * b.imag) / den)};
  }
  // Component-wise floored remainder, as MLX defines % on complex.
  friend constexpr complex_t operator%(complex_t a, complex_t b) {
    auto fmod1 = [](T x, T m) {
      T r = T(x - m * T(int64_t(x / m)));
      return (r != T(0) && ((r < T(0)) != (m < T(0)))) ? T(r + m) : r;
    };
    return {fmod1(a.real, b.real), fmod1(a.imag, b.imag)};
  }
  friend constexpr bool operator==(complex_t a, complex_t b) {
    return a.real == b.real && a.imag == b.imag;
  }
  // Ordered by real part, then imaginary part.
  friend constexpr bool operator<(complex_t a, complex_t b) {
    return a.real < b.real || (a.real == b.real && a.imag < b.imag);
  }
  friend constexpr bool operator>(complex_t a, complex_t b) { return b < a; }
  friend constexpr bool operator<=(complex_t a, complex_t b) { return !(b < a); }
  friend constexpr bool operator>=(complex_t a, complex_t b) { return !(a < b); }
};

// Mixed with a real scalar on either side.
#define __KP_COMPLEX_SCALAR_OP(op)                                                    \
  template <typename T, typename U>                                                 \
    requires __kp::arith_scalar<U>                                                    \
  constexpr complex_t<T> operator op(complex_t<T> a, U b) {                         \
    return a op complex_t<T>(b);                                                    \
  }                                                                                 \
  template <typename T, typename U>                                                 \
    requires __kp::arith_scalar<U>                                                    \
  constexpr complex_t<T> operator op(U a, complex_t<T> b) {                         \
    return complex_t<T>(a) op b;                                                    \
  }
__KP_COMPLEX_SCALAR_OP(+)
__KP_COMPLEX_SCALAR_OP(-)
__KP_COMPLEX_SCALAR_OP(*)
__KP_COMPLEX_SCALAR_OP(/)
#undef __KP_COMPLEX_SCALAR_OP

using complex32_t = complex_t<half>;
using complex64_t = complex_t<float>;
static_assert(sizeof(complex64_t) == 8 && sizeof(complex32_t) == 4);

// ---- Limits ------------------------------------------------------------------------------------
// Integers: the type's range. Floating types: max/min are +-inf, finite_max/finite_min +-max.
template <typename U>
struct Limits {
  static constexpr U max = metal::numeric_limits<U>::max();
  static constexpr U min = metal::numeric_limits<U>::min();
  static constexpr U finite_max = metal::numeric_limits<U>::max();
  static constexpr U finite_min = metal::numeric_limits<U>::min();
};
namespace __kp {
template <typename U>
struct mlx_float_limits {
  static constexpr U max = metal::numeric_limits<U>::infinity();
  static constexpr U min = -metal::numeric_limits<U>::infinity();
  static constexpr U finite_max = metal::numeric_limits<U>::max();
  static constexpr U finite_min = -metal::numeric_limits<U>::max();
};
}  // namespace __kp
template <> struct Limits<half> : __kp::mlx_float_limits<half> {};
template <> struct Limits<float> : __kp::mlx_float_limits<float> {};
template <> struct Limits<bfloat> : __kp::mlx_float_limits<bfloat> {};
template <>
struct Limits<bool> {
  static constexpr bool max = true;
  static constexpr bool min = false;
};
template <typename T>
struct Limits<complex_t<T>> {
  static constexpr complex_t<T> max = complex_t<T>(metal::numeric_limits<T>::infinity(),
                                                   metal::numeric_limits<T>::infinity());
  static constexpr complex_t<T> min = complex_t<T>(-metal::numeric_limits<T>::infinity(),
                                                   -metal::numeric_limits<T>::infinity());
};

// ---- indexing ----------------------------------------------------------------------------------
// Memory offset of row-major element number `elem` of an array with `shape` and `strides`
// (in elements), computed in IdxT (the type of elem unless given).
template <typename IdxT = int64_t>
METAL_FUNC IdxT elem_to_loc(IdxT elem, __KP_CONSTANT const int* shape,
                            __KP_CONSTANT const int64_t* strides, int ndim) {
  IdxT loc = 0;
  for (int d = ndim - 1; d >= 0 && elem > 0; --d) {
    loc += IdxT(elem % shape[d]) * IdxT(strides[d]);
    elem /= shape[d];
  }
  return loc;
}
// Grid form: x indexes the last dimension, y the one before, z all the leading ones.
template <typename IdxT = int64_t>
METAL_FUNC IdxT elem_to_loc(uint3 elem, __KP_CONSTANT const int* shape,
                            __KP_CONSTANT const int64_t* strides, int ndim) {
  IdxT loc = elem.x * IdxT(strides[ndim - 1]) + elem.y * IdxT(strides[ndim - 2]);
  for (int d = ndim - 3; d >= 0; --d) {
    loc += (elem.z % shape[d]) * IdxT(strides[d]);
    elem.z /= shape[d];
  }
  return loc;
}
template <typename IdxT = int64_t>
METAL_FUNC IdxT elem_to_loc_1(uint elem, __KP_CONSTANT const int64_t& stride) {
  return elem * IdxT(stride);
}
template <typename IdxT = int64_t>
METAL_FUNC IdxT elem_to_loc_2(uint2 elem, __KP_CONSTANT const int64_t strides[2]) {
  return elem.x * IdxT(strides[1]) + elem.y * IdxT(strides[0]);
}
template <typename IdxT = int64_t>
METAL_FUNC IdxT elem_to_loc_3(uint3 elem, __KP_CONSTANT const int64_t strides[3]) {
  return elem.x * IdxT(strides[2]) + elem.y * IdxT(strides[1]) + elem.z * IdxT(strides[0]);
}
// The grid form for two and three arrays of one shape with their own strides.
template <typename IdxT = int64_t>
METAL_FUNC vec<IdxT, 2> elem_to_loc_2_nd(uint3 elem, __KP_CONSTANT const int* shape,
                                         __KP_CONSTANT const int64_t* a_strides,
                                         __KP_CONSTANT const int64_t* b_strides, int ndim) {
  vec<IdxT, 2> loc = {
      IdxT(elem.x * IdxT(a_strides[ndim - 1]) + IdxT(elem.y) * IdxT(a_strides[ndim - 2])),
      IdxT(elem.x * IdxT(b_strides[ndim - 1]) + elem.y * IdxT(b_strides[ndim - 2]))};
  for (int d = ndim - 3; d >= 0; --d) {
    uint l = elem.z % shape[d];
    loc.x += l * IdxT(a_strides[d]);
    loc.y += l * IdxT(b_strides[d]);
    elem.z /= shape[d];
  }
  return loc;
}
template <typename IdxT = int64_t>
METAL_FUNC vec<IdxT, 3> elem_to_loc_3_nd(uint3 elem, __KP_CONSTANT const int* shape,
                                         __KP_CONSTANT const int64_t* a_strides,
                                         __KP_CONSTANT const int64_t* b_strides,
                                         __KP_CONSTANT const int64_t* c_strides,
                                         int ndim) {
  vec<IdxT, 3> loc = {
      IdxT(elem.x * IdxT(a_strides[ndim - 1])) + IdxT(elem.y * IdxT(a_strides[ndim - 2])),
      IdxT(elem.x * IdxT(b_strides[ndim - 1])) + IdxT(elem.y * IdxT(b_strides[ndim - 2])),
      IdxT(elem.x * IdxT(c_strides[ndim - 1])) + IdxT(elem.y * IdxT(c_strides[ndim - 2]))};
  for (int d = ndim - 3; d >= 0; --d) {
    uint l = elem.z % shape[d];
    loc.x += l * IdxT(a_strides[d]);
    loc.y += l * IdxT(b_strides[d]);
    loc.z += l * IdxT(c_strides[d]);
    elem.z /= shape[d];
  }
  return loc;
}

// ---- arithmetic --------------------------------------------------------------------------------
template <typename T, typename U>
inline T ceildiv(T N, U M) {
  return (N + M - 1) / M;
}

// log(1 + z) for complex z, accurate near 0. (Real log1p is metal::log1p.)
inline complex64_t log1p(complex64_t z) {
  float x = z.real, y = z.imag;
  float theta = metal::atan2(y, x + 1);
  if (metal::precise::sqrt(x * x + y * y) < 0.5f) {
    float r = x * (2 + x) + y * y;  // |1 + z|^2 - 1
    return r == 0 ? complex64_t(x, theta) : complex64_t(0.5f * metal::log1p(r), theta);
  }
  return {metal::log(metal::sqrt((x + 1) * (x + 1) + y * y)), theta};
}

// ---- shuffles of types Metal lacks (via 32-bit halves) -------------------------------------------
#define __KP_MLX_SHUFFLE(name, ...)                                                           \
  inline uint64_t name(uint64_t data, __VA_ARGS__ arg, __kp::site s = __KP_HERE) {              \
    return as_type<uint64_t>(metal::name(as_type<uint2>(data), arg, s));                    \
  }                                                                                         \
  inline int64_t name(int64_t data, __VA_ARGS__ arg, __kp::site s = __KP_HERE) {                \
    return as_type<int64_t>(metal::name(as_type<uint2>(data), arg, s));                     \
  }                                                                                         \
  inline bool name(bool data, __VA_ARGS__ arg, __kp::site s = __KP_HERE) {                      \
    return metal::name(uint32_t(data), arg, s) != 0;                                        \
  }                                                                                         \
  inline complex64_t name(complex64_t data, __VA_ARGS__ arg, __kp::site s = __KP_HERE) {        \
    return complex64_t(metal::name(vec<float, 2>(data), arg, s));                           \
  }
__KP_MLX_SHUFFLE(simd_shuffle, uint16_t)
__KP_MLX_SHUFFLE(simd_shuffle_up, uint16_t)
__KP_MLX_SHUFFLE(simd_shuffle_down, uint16_t)
#undef __KP_MLX_SHUFFLE
inline uint64_t simd_shuffle_and_fill_up(uint64_t data, uint64_t filling, uint16_t delta,
                                         __kp::site s = __KP_HERE) {
  return as_type<uint64_t>(
      metal::simd_shuffle_and_fill_up(as_type<uint2>(data), as_type<uint2>(filling), delta, s));
}
inline int64_t simd_shuffle_and_fill_up(int64_t data, int64_t filling, uint16_t delta,
                                        __kp::site s = __KP_HERE) {
  return as_type<int64_t>(
      metal::simd_shuffle_and_fill_up(as_type<uint2>(data), as_type<uint2>(filling), delta, s));
}
inline bool simd_shuffle_and_fill_up(bool data, bool filling, uint16_t delta,
                                     __kp::site s = __KP_HERE) {
  return metal::simd_shuffle_and_fill_up(uint32_t(data), uint32_t(filling), delta, s) != 0;
}
inline complex64_t simd_shuffle_and_fill_up(complex64_t data, complex64_t filling,
                                            uint16_t delta, __kp::site s = __KP_HERE) {
  return complex64_t(metal::simd_shuffle_and_fill_up(vec<float, 2>(data), vec<float, 2>(filling),
                                                     delta, s));
}

// ---- casts -------------------------------------------------------------------------------------
// static_cast, except that to bool a float is true unless it is +-0 (so NaN is true).
template <typename U, typename T>
inline U cast_to(T val) {
  if constexpr (__kp::is_same_v<U, bool> && __kp::is_same_v<T, float>)
    return (as_type<uint32_t>(val) & 0x7FFFFFFFu) != 0;
  else if constexpr (__kp::is_same_v<U, bool> && __kp::is_same_v<T, bfloat16_t>)
    return (as_type<uint16_t>(val) & 0x7FFFu) != 0;
  else if constexpr (__kp::is_same_v<U, bool> && __kp::is_same_v<T, complex64_t>)
    return cast_to<bool>(val.real) || cast_to<bool>(val.imag);
  else if constexpr (__kp::arith_scalar<U> && __kp::arith_scalar<T>)
    return __kp::cvt<U>(val);
  else
    return static_cast<U>(val);
}

// MLX's logging hook; a no-op outside MLX debug builds.
namespace mlx {
struct os_log {
  constexpr os_log(const char*, const char*) {}
  template <typename... Args>
  void log_debug(const char*, Args...) const {}
};
}  // namespace mlx
