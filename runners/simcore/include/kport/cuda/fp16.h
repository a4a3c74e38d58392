// CUDA __half / __half2 (cuda_fp16.h). Storage is the IEEE binary16 bit pattern; arithmetic runs in
// float and rounds once to half, which is exactly what a native f16 op gives for + - * / sqrt.
// The constructor/conversion set mirrors CUDA's so that overload resolution (and its ambiguities)
// match nvcc; __CUDA_NO_HALF_CONVERSIONS__ / _OPERATORS__ / __CUDA_NO_HALF2_OPERATORS__ are
// honoured.
#pragma once
#pragma clang system_header
#include <kport/rt.h>
#include <kport/cuda/rounding.h>
#include <kport/cuda/vector_types.h>

struct alignas(2) __half_raw {
  unsigned short x;
};
struct alignas(4) __half2_raw {
  unsigned short x, y;
};
struct __nv_bfloat16;

struct alignas(2) __half {
 protected:
  unsigned short __x;

 public:
  __half() = default;
  constexpr __half(const __half_raw& r) : __x(r.x) {}
  __half& operator=(const __half_raw& r) {
    __x = r.x;
    return *this;
  }
  volatile __half& operator=(const __half_raw& r) volatile {
    __x = r.x;
    return *this;
  }
  volatile __half& operator=(const volatile __half_raw& r) volatile {
    __x = r.x;
    return *this;
  }
  constexpr operator __half_raw() const { return __half_raw{__x}; }
  operator __half_raw() const volatile { return __half_raw{__x}; }

#if !defined(__CUDA_NO_HALF_CONVERSIONS__)
  explicit __half(__nv_bfloat16 b);  // defined in bf16.h
  __half(float f) : __x(__kp_cuda::fmt_half::rn(f)) {}
  __half(double d) : __x(__kp_cuda::to16<__kp_cuda::fmt_half>(d, __kp_cuda::RN)) {}
  operator float() const { return __kp_cuda::fmt_half::to_float_canon(__x); }
  __half& operator=(float f) {
    __x = __kp_cuda::fmt_half::rn(f);
    return *this;
  }
  __half& operator=(double d) {
    __x = __kp_cuda::to16<__kp_cuda::fmt_half>(d, __kp_cuda::RN);
    return *this;
  }

  // Integers convert with round-to-nearest; the reverse truncates and saturates, as PTX cvt does.
#define __KP_HALF_INT(I)                                                                             \
  __half(I v) : __x(__kp_cuda::int_to16<__kp_cuda::fmt_half>(v, __kp_cuda::RN)) {}                       \
  operator I() const { return __kp_cuda::f16_to_int<I, __kp_cuda::fmt_half>(__x, __kp_cuda::RZ); }
  __KP_HALF_INT(short)
  __KP_HALF_INT(unsigned short)
  __KP_HALF_INT(int)
  __KP_HALF_INT(unsigned int)
  __KP_HALF_INT(long)
  __KP_HALF_INT(unsigned long)
  __KP_HALF_INT(long long)
  __KP_HALF_INT(unsigned long long)
#undef __KP_HALF_INT
  operator signed char() const {
    return __kp_cuda::f16_to_int<signed char, __kp_cuda::fmt_half>(__x, __kp_cuda::RZ);
  }
  operator unsigned char() const {
    return __kp_cuda::f16_to_int<unsigned char, __kp_cuda::fmt_half>(__x, __kp_cuda::RZ);
  }
  operator char() const { return __kp_cuda::f16_to_int<char, __kp_cuda::fmt_half>(__x, __kp_cuda::RZ); }
  operator bool() const { return (__x & 0x7FFFu) != 0; }
  __half& operator=(short v) { return *this = __half(v); }
  __half& operator=(unsigned short v) { return *this = __half(v); }
  __half& operator=(int v) { return *this = __half(v); }
  __half& operator=(unsigned int v) { return *this = __half(v); }
  __half& operator=(long long v) { return *this = __half(v); }
  __half& operator=(unsigned long long v) { return *this = __half(v); }
#endif
};

struct alignas(4) __half2 {
  __half x, y;
  __half2() = default;
  constexpr __half2(const __half& a, const __half& b) : x(a), y(b) {}
  constexpr __half2(const __half2_raw& r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
  __half2& operator=(const __half2_raw& r) { return *this = __half2(r); }
  operator __half2_raw() const { return __half2_raw{__half_raw(x).x, __half_raw(y).x}; }
};

#if !defined(CUDA_NO_HALF)
typedef __half half;
typedef __half2 half2;
#endif

static_assert(sizeof(__half) == 2 && alignof(__half) == 2, "CUDA __half layout");
static_assert(sizeof(__half2) == 4 && alignof(__half2) == 4, "CUDA __half2 layout");
static_assert(__is_trivially_copyable(__half2), "shuffles and shared memory copy bytes");

// ---- Conversions ------------------------------------------------------------------------------
__KP_INLINE constexpr unsigned short __half_as_ushort(const __half h) {
  return __kp_cuda::bits<unsigned short>(h);
}
__KP_INLINE constexpr short __half_as_short(const __half h) { return __kp_cuda::bits<short>(h); }
__KP_INLINE constexpr __half __ushort_as_half(const unsigned short u) { return __half_raw{u}; }
__KP_INLINE constexpr __half __short_as_half(const short s) { return __half_raw{(unsigned short)s}; }

__KP_INLINE float __half2float(const __half h) {
  return __kp_cuda::fmt_half::to_float_canon(__kp_cuda::bits<unsigned short>(h));
}
__KP_INLINE __half __kp_half_rn(float f) { return __ushort_as_half(__kp_cuda::fmt_half::rn(f)); }
__KP_INLINE __half __float2half(const float f) { return __kp_half_rn(f); }
__KP_INLINE __half __float2half_rn(const float f) { return __kp_half_rn(f); }
__KP_INLINE __half __float2half_rz(const float f) {
  return __ushort_as_half(__kp_cuda::to16<__kp_cuda::fmt_half>(f, __kp_cuda::RZ));
}
__KP_INLINE __half __float2half_rd(const float f) {
  return __ushort_as_half(__kp_cuda::to16<__kp_cuda::fmt_half>(f, __kp_cuda::RD));
}
__KP_INLINE __half __float2half_ru(const float f) {
  return __ushort_as_half(__kp_cuda::to16<__kp_cuda::fmt_half>(f, __kp_cuda::RU));
}
__KP_INLINE __half __double2half(const double d) {
  return __ushort_as_half(__kp_cuda::to16<__kp_cuda::fmt_half>(d, __kp_cuda::RN));
}

__KP_INLINE __half2 __halves2half2(const __half a, const __half b) { return __half2(a, b); }
__KP_INLINE __half2 make_half2(const __half a, const __half b) { return __half2(a, b); }
__KP_INLINE __half2 __half2half2(const __half a) { return __half2(a, a); }
__KP_INLINE __half2 __float2half2_rn(const float f) { return __half2half2(__kp_half_rn(f)); }
__KP_INLINE __half2 __floats2half2_rn(const float a, const float b) {
  return __half2(__kp_half_rn(a), __kp_half_rn(b));
}
__KP_INLINE __half2 __float22half2_rn(const float2 f) { return __floats2half2_rn(f.x, f.y); }
__KP_INLINE float2 __half22float2(const __half2 h) {
  return make_float2(__kp_cuda::fmt_half::to_float_canon(__kp_cuda::bits<unsigned short>(h.x)),
                     __kp_cuda::fmt_half::to_float_canon(__kp_cuda::bits<unsigned short>(h.y)));
}
__KP_INLINE __half __low2half(const __half2 h) { return h.x; }
__KP_INLINE __half __high2half(const __half2 h) { return h.y; }
__KP_INLINE float __low2float(const __half2 h) {
  return __kp_cuda::fmt_half::to_float_canon(__kp_cuda::bits<unsigned short>(h.x));
}
__KP_INLINE float __high2float(const __half2 h) {
  return __kp_cuda::fmt_half::to_float_canon(__kp_cuda::bits<unsigned short>(h.y));
}
__KP_INLINE __half2 __lows2half2(const __half2 a, const __half2 b) { return __half2(a.x, b.x); }
__KP_INLINE __half2 __highs2half2(const __half2 a, const __half2 b) { return __half2(a.y, b.y); }
__KP_INLINE __half2 __low2half2(const __half2 a) { return __half2(a.x, a.x); }
__KP_INLINE __half2 __high2half2(const __half2 a) { return __half2(a.y, a.y); }
__KP_INLINE __half2 __lowhigh2highlow(const __half2 a) { return __half2(a.y, a.x); }

// __half2int_rn, __int2half_rz, ...: every integer type in every rounding mode. Shared with bf16.
#define __KP_F16_INT_CONV_MODE(H, HN, FMT, T, I, SFX, M)                                             \
  __KP_INLINE I __##HN##2##T##_##SFX(const H h) {                                                    \
    return __kp_cuda::f16_to_int<I, FMT>(__kp_cuda::bits<unsigned short>(h), M);                       \
  }                                                                                                \
  __KP_INLINE H __##T##2##HN##_##SFX(const I i) {                                                    \
    return __kp_cuda::bits<H>(__kp_cuda::int_to16<FMT>(i, M));                                         \
  }
#define __KP_F16_INT_CONV(H, HN, FMT, T, I)                                                          \
  __KP_F16_INT_CONV_MODE(H, HN, FMT, T, I, rn, __kp_cuda::RN)                                          \
  __KP_F16_INT_CONV_MODE(H, HN, FMT, T, I, rz, __kp_cuda::RZ)                                          \
  __KP_F16_INT_CONV_MODE(H, HN, FMT, T, I, rd, __kp_cuda::RD)                                          \
  __KP_F16_INT_CONV_MODE(H, HN, FMT, T, I, ru, __kp_cuda::RU)
#define __KP_F16_ALL_INT_CONV(H, HN, FMT)                                                            \
  __KP_F16_INT_CONV(H, HN, FMT, int, int)                                                            \
  __KP_F16_INT_CONV(H, HN, FMT, uint, unsigned int)                                                  \
  __KP_F16_INT_CONV(H, HN, FMT, short, short)                                                        \
  __KP_F16_INT_CONV(H, HN, FMT, ushort, unsigned short)                                              \
  __KP_F16_INT_CONV(H, HN, FMT, ll, long long)                                                       \
  __KP_F16_INT_CONV(H, HN, FMT, ull, unsigned long long)                                             \
  __KP_INLINE signed char __##HN##2char_rz(const H h) {                                              \
    return __kp_cuda::f16_to_int<signed char, FMT>(__kp_cuda::bits<unsigned short>(h), __kp_cuda::RZ);   \
  }                                                                                                \
  __KP_INLINE unsigned char __##HN##2uchar_rz(const H h) {                                           \
    return __kp_cuda::f16_to_int<unsigned char, FMT>(__kp_cuda::bits<unsigned short>(h), __kp_cuda::RZ); \
  }

__KP_F16_ALL_INT_CONV(__half, half, __kp_cuda::fmt_half)

#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_NEG_ZERO_FP16 __ushort_as_half((unsigned short)0x8000U)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)

// Arithmetic, comparisons and math shared with bf16 (same names, other type).
#define __KP_H __half
#define __KP_H2 __half2
#define __KP_FMT __kp_cuda::fmt_half
#if defined(__CUDA_NO_HALF_OPERATORS__)
#define __KP_H_NO_OPS 1
#else
#define __KP_H_NO_OPS 0
#endif
#if defined(__CUDA_NO_HALF2_OPERATORS__)
#define __KP_H2_NO_OPS 1
#else
#define __KP_H2_NO_OPS 0
#endif
#include <kport/cuda/f16_ops.inc>
