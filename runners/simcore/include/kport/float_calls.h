// Narrowing to half and bfloat without the C runtime. Where the target CPU has no instruction
// for a conversion, clang compiles it to a call of the compiler runtime (__truncsfbf2 for
// `bfloat(x)` on an x86 without AVX512-BF16; __truncsfhf2 / __extendhfsf2 for `half` under a
// clang that targets generic x86-64). Kernels link against nothing, so these calls are
// defined here, inside each kernel library (hidden: nothing is imported or exported).
//
// bfloat: x86 CPUs that have the instruction treat subnormal inputs as zero, so kernels are
// built with it off (simbuild.target_flags) and every host rounds here, the same way. Both
// formats round to nearest even, keep subnormals, and keep a NaN a quiet NaN of its sign.
// Whether Apple GPUs keep bfloat subnormals is unconfirmed (docs/simulators.md); CUDA's
// __float2bfloat16 keeps them, and so do x86's F16C conversions for half.
#pragma once

#define __KP_LIBCALL extern "C" __attribute__((visibility("hidden"), used, weak))

// A double narrowed to float by rounding to odd: exact when the float is, else truncated
// toward zero with the last bit set. Narrowed again to nearest even with at least two bits to
// spare (half and bfloat keep 10 and 7 of float's 23), the double is rounded once.
inline float __kp_round_to_odd(double d) {
  float f = (float)d;
  if (d == d && (double)f != d) {
    unsigned u = __builtin_bit_cast(unsigned, f);
    if (__builtin_fabs((double)f) > __builtin_fabs(d)) u -= 1;  // toward zero (f is not 0)
    f = __builtin_bit_cast(float, u | 1u);
  }
  return f;
}

__KP_LIBCALL __bf16 __truncsfbf2(float f) {
  unsigned u = __builtin_bit_cast(unsigned, f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: the top of its payload, made quiet
    return __builtin_bit_cast(__bf16, (unsigned short)((u >> 16) | 0x0040u));
  return __builtin_bit_cast(__bf16, (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16));
}

__KP_LIBCALL __bf16 __truncdfbf2(double d) { return __truncsfbf2(__kp_round_to_odd(d)); }

__KP_LIBCALL _Float16 __truncsfhf2(float f) {
  unsigned u = __builtin_bit_cast(unsigned, f);
  unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
  unsigned a = u & 0x7FFFFFFFu, r;
  if (a > 0x7F800000u)  // NaN
    r = 0x7E00u | ((a >> 13) & 0x1FFu);
  else if (a >= 0x477FF000u)  // 65520 and up (the largest half plus half its step): infinity
    r = 0x7C00u;
  else if (a >= 0x38800000u) {  // 2^-14 and up: a normal half; the exponent rebiased
    unsigned m = a - 0x38000000u;
    r = (m + 0xFFFu + ((m >> 13) & 1u)) >> 13;
  } else if (a <= 0x33000000u) {  // 2^-25 and below (a tie with 0): zero
    r = 0;
  } else {  // a subnormal half: the value in steps of 2^-24, rounded to nearest even
    unsigned mant = (a & 0x7FFFFFu) | 0x800000u, shift = 126u - (a >> 23);
    unsigned rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    r = mant >> shift;
    r += rem > half || (rem == half && (r & 1u));
  }
  return __builtin_bit_cast(_Float16, (unsigned short)(sign | r));
}

__KP_LIBCALL _Float16 __truncdfhf2(double d) { return __truncsfhf2(__kp_round_to_odd(d)); }

__KP_LIBCALL float __extendhfsf2(_Float16 h) {
  unsigned short b = __builtin_bit_cast(unsigned short, h);
  unsigned sign = (unsigned)(b & 0x8000u) << 16, e = (b >> 10) & 0x1Fu, m = b & 0x3FFu;
  if (e == 0x1F)  // infinity or NaN
    return __builtin_bit_cast(float, sign | 0x7F800000u | (m << 13));
  if (e == 0) {  // zero or a subnormal: m steps of 2^-24, exact in float
    float v = (float)m * 0x1p-24f;
    return __builtin_bit_cast(float, sign | __builtin_bit_cast(unsigned, v));
  }
  return __builtin_bit_cast(float, sign | ((e + 112u) << 23) | (m << 13));
}

#undef __KP_LIBCALL
