// CUDA __nv_bfloat16 / __nv_bfloat162 (cuda_bf16.h), built like fp16.h: bit-pattern storage,
// float arithmetic rounded once to bf16 (exact for + - * / sqrt since float has > 2*8+2 bits).
// Honours __CUDA_NO_BFLOAT16_CONVERSIONS__, _OPERATORS__ and __CUDA_NO_BFLOAT162_OPERATORS__.
#pragma once
#pragma clang system_header
#include <kport/cuda/fp16.h>

struct alignas(2) __nv_bfloat16_raw {
  unsigned short x;
};
struct alignas(4) __nv_bfloat162_raw {
  unsigned short x, y;
};

struct alignas(2) __nv_bfloat16 {
 protected:
  unsigned short __x;

 public:
  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
  __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) {
    __x = r.x;
    return *this;
  }
  volatile __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) volatile {
    __x = r.x;
    return *this;
  }
  volatile __nv_bfloat16& operator=(const volatile __nv_bfloat16_raw& r) volatile {
    __x = r.x;
    return *this;
  }
  constexpr operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
  operator __nv_bfloat16_raw() const volatile { return __nv_bfloat16_raw{__x}; }

#if !defined(__CUDA_NO_BFLOAT16_CONVERSIONS__)
  explicit __nv_bfloat16(const __half h)
      : __x(__kp_cuda::fmt_bf16::rn(__kp_cuda::fmt_half::to_float(__kp_cuda::bits<unsigned short>(h)))) {}
  __nv_bfloat16(float f) : __x(__kp_cuda::fmt_bf16::rn(f)) {}
  __nv_bfloat16(double d) : __x(__kp_cuda::to16<__kp_cuda::fmt_bf16>(d, __kp_cuda::RN)) {}
  operator float() const { return __kp_cuda::fmt_bf16::to_float(__x); }
  __nv_bfloat16& operator=(float f) {
    __x = __kp_cuda::fmt_bf16::rn(f);
    return *this;
  }
  __nv_bfloat16& operator=(double d) {
    __x = __kp_cuda::to16<__kp_cuda::fmt_bf16>(d, __kp_cuda::RN);
    return *this;
  }
#define __KP_BF16_INT(I)                                                                             \
  __nv_bfloat16(I v) : __x(__kp_cuda::int_to16<__kp_cuda::fmt_bf16>(v, __kp_cuda::RN)) {}                \
  operator I() const { return __kp_cuda::f16_to_int<I, __kp_cuda::fmt_bf16>(__x, __kp_cuda::RZ); }
  __KP_BF16_INT(short)
  __KP_BF16_INT(unsigned short)
  __KP_BF16_INT(int)
  __KP_BF16_INT(unsigned int)
  __KP_BF16_INT(long)
  __KP_BF16_INT(unsigned long)
  __KP_BF16_INT(long long)
  __KP_BF16_INT(unsigned long long)
#undef __KP_BF16_INT
  operator signed char() const {
    return __kp_cuda::f16_to_int<signed char, __kp_cuda::fmt_bf16>(__x, __kp_cuda::RZ);
  }
  operator unsigned char() const {
    return __kp_cuda::f16_to_int<unsigned char, __kp_cuda::fmt_bf16>(__x, __kp_cuda::RZ);
  }
  operator char() const { return __kp_cuda::f16_to_int<char, __kp_cuda::fmt_bf16>(__x, __kp_cuda::RZ); }
  operator bool() const { return (__x & 0x7FFFu) != 0; }
  __nv_bfloat16& operator=(short v) { return *this = __nv_bfloat16(v); }
  __nv_bfloat16& operator=(unsigned short v) { return *this = __nv_bfloat16(v); }
  __nv_bfloat16& operator=(int v) { return *this = __nv_bfloat16(v); }
  __nv_bfloat16& operator=(unsigned int v) { return *this = __nv_bfloat16(v); }
  __nv_bfloat16& operator=(long long v) { return *this = __nv_bfloat16(v); }
  __nv_bfloat16& operator=(unsigned long long v) { return *this = __nv_bfloat16(v); }
#endif
};

struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  constexpr __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
  constexpr __nv_bfloat162(const __nv_bfloat162_raw& r)
      : x(__nv_bfloat16_raw{r.x}), y(__nv_bfloat16_raw{r.y}) {}
  __nv_bfloat162& operator=(const __nv_bfloat162_raw& r) { return *this = __nv_bfloat162(r); }
  operator __nv_bfloat162_raw() const {
    return __nv_bfloat162_raw{__nv_bfloat16_raw(x).x, __nv_bfloat16_raw(y).x};
  }
};

#if !defined(__CUDA_NO_HALF_CONVERSIONS__)
inline __half::__half(__nv_bfloat16 b)
    : __x(__kp_cuda::fmt_half::rn(__kp_cuda::fmt_bf16::to_float(__kp_cuda::bits<unsigned short>(b)))) {}
#endif

typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

static_assert(sizeof(__nv_bfloat16) == 2 && alignof(__nv_bfloat16) == 2, "CUDA bf16 layout");
static_assert(sizeof(__nv_bfloat162) == 4 && alignof(__nv_bfloat162) == 4, "CUDA bf162 layout");

// ---- Conversions ------------------------------------------------------------------------------
__KP_INLINE constexpr unsigned short __bfloat16_as_ushort(const __nv_bfloat16 h) {
  return __kp_cuda::bits<unsigned short>(h);
}
__KP_INLINE constexpr short __bfloat16_as_short(const __nv_bfloat16 h) {
  return __kp_cuda::bits<short>(h);
}
__KP_INLINE constexpr __nv_bfloat16 __ushort_as_bfloat16(const unsigned short u) {
  return __nv_bfloat16_raw{u};
}
__KP_INLINE constexpr __nv_bfloat16 __short_as_bfloat16(const short s) {
  return __nv_bfloat16_raw{(unsigned short)s};
}

__KP_INLINE float __bfloat162float(const __nv_bfloat16 h) {
  return __kp_cuda::fmt_bf16::to_float(__kp_cuda::bits<unsigned short>(h));
}
__KP_INLINE __nv_bfloat16 __kp_bf16_rn(float f) {
  return __ushort_as_bfloat16(__kp_cuda::fmt_bf16::rn(f));
}
__KP_INLINE __nv_bfloat16 __float2bfloat16(const float f) { return __kp_bf16_rn(f); }
__KP_INLINE __nv_bfloat16 __float2bfloat16_rn(const float f) { return __kp_bf16_rn(f); }
__KP_INLINE __nv_bfloat16 __float2bfloat16_rz(const float f) {
  return __ushort_as_bfloat16(__kp_cuda::to16<__kp_cuda::fmt_bf16>(f, __kp_cuda::RZ));
}
__KP_INLINE __nv_bfloat16 __float2bfloat16_rd(const float f) {
  return __ushort_as_bfloat16(__kp_cuda::to16<__kp_cuda::fmt_bf16>(f, __kp_cuda::RD));
}
__KP_INLINE __nv_bfloat16 __float2bfloat16_ru(const float f) {
  return __ushort_as_bfloat16(__kp_cuda::to16<__kp_cuda::fmt_bf16>(f, __kp_cuda::RU));
}
__KP_INLINE __nv_bfloat16 __double2bfloat16(const double d) {
  return __ushort_as_bfloat16(__kp_cuda::to16<__kp_cuda::fmt_bf16>(d, __kp_cuda::RN));
}
__KP_INLINE __half __bfloat162half(const __nv_bfloat16 b) {
  return __ushort_as_half(
      __kp_cuda::fmt_half::rn(__kp_cuda::fmt_bf16::to_float(__kp_cuda::bits<unsigned short>(b))));
}
__KP_INLINE __nv_bfloat16 __half2bfloat16(const __half h) {
  return __kp_bf16_rn(__kp_cuda::fmt_half::to_float(__kp_cuda::bits<unsigned short>(h)));
}

__KP_INLINE __nv_bfloat162 __halves2bfloat162(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __nv_bfloat162(a, b);
}
__KP_INLINE __nv_bfloat162 make_bfloat162(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __nv_bfloat162(a, b);
}
__KP_INLINE __nv_bfloat162 __bfloat162bfloat162(const __nv_bfloat16 a) {
  return __nv_bfloat162(a, a);
}
__KP_INLINE __nv_bfloat162 __float2bfloat162_rn(const float f) {
  return __bfloat162bfloat162(__kp_bf16_rn(f));
}
__KP_INLINE __nv_bfloat162 __floats2bfloat162_rn(const float a, const float b) {
  return __nv_bfloat162(__kp_bf16_rn(a), __kp_bf16_rn(b));
}
__KP_INLINE __nv_bfloat162 __float22bfloat162_rn(const float2 f) {
  return __floats2bfloat162_rn(f.x, f.y);
}
__KP_INLINE float2 __bfloat1622float2(const __nv_bfloat162 h) {
  return make_float2(__kp_cuda::fmt_bf16::to_float(__kp_cuda::bits<unsigned short>(h.x)),
                     __kp_cuda::fmt_bf16::to_float(__kp_cuda::bits<unsigned short>(h.y)));
}
__KP_INLINE __nv_bfloat16 __low2bfloat16(const __nv_bfloat162 h) { return h.x; }
__KP_INLINE __nv_bfloat16 __high2bfloat16(const __nv_bfloat162 h) { return h.y; }
__KP_INLINE float __low2float(const __nv_bfloat162 h) {
  return __kp_cuda::fmt_bf16::to_float(__kp_cuda::bits<unsigned short>(h.x));
}
__KP_INLINE float __high2float(const __nv_bfloat162 h) {
  return __kp_cuda::fmt_bf16::to_float(__kp_cuda::bits<unsigned short>(h.y));
}
__KP_INLINE __nv_bfloat162 __lows2bfloat162(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(a.x, b.x);
}
__KP_INLINE __nv_bfloat162 __highs2bfloat162(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(a.y, b.y);
}
__KP_INLINE __nv_bfloat162 __low2bfloat162(const __nv_bfloat162 a) {
  return __nv_bfloat162(a.x, a.x);
}
__KP_INLINE __nv_bfloat162 __high2bfloat162(const __nv_bfloat162 a) {
  return __nv_bfloat162(a.y, a.y);
}
__KP_INLINE __nv_bfloat162 __lowhigh2highlow(const __nv_bfloat162 a) {
  return __nv_bfloat162(a.y, a.x);
}

__KP_F16_ALL_INT_CONV(__nv_bfloat16, bfloat16, __kp_cuda::fmt_bf16)

#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_NEG_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x8000U)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)

#define __KP_H __nv_bfloat16
#define __KP_H2 __nv_bfloat162
#define __KP_FMT __kp_cuda::fmt_bf16
#if defined(__CUDA_NO_BFLOAT16_OPERATORS__)
#define __KP_H_NO_OPS 1
#else
#define __KP_H_NO_OPS 0
#endif
#if defined(__CUDA_NO_BFLOAT162_OPERATORS__)
#define __KP_H2_NO_OPS 1
#else
#define __KP_H2_NO_OPS 0
#endif
#include <kport/cuda/f16_ops.inc>
