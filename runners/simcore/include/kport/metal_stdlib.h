// Metal dialect shim: what `#include <metal_stdlib>` gives an MSL kernel, as header-only C++ for
// clang. Types are global (as in MSL); functions live in namespace metal (kernels write
// `using namespace metal;` themselves, or get it from mlx_prelude.h). The shim's helpers are in __kp.
#pragma once
#pragma clang system_header
// The address spaces of the shim's own pointer parameters, as MSL declares them: clang address
// spaces in metal_sim's address-space check unit (runners/metal_sim/spaces.py), nothing in the
// code that runs (its sanitizer hooks see only address space 0).
#ifdef __KP_ADDRESS_SPACES
#define __KP_DEVICE __attribute__((address_space(1)))
#define __KP_CONSTANT __attribute__((address_space(2)))
#define __KP_THREADGROUP __attribute__((address_space(3)))
#else
#define __KP_DEVICE
#define __KP_CONSTANT
#define __KP_THREADGROUP
#endif
#include "metal/types.h"
#include "metal/packed.h"
#include "metal/convert.h"
#include "metal/matrix.h"
#include "metal/math.h"
#include "metal/integer.h"
#include "metal/relational.h"
#include "metal/simd.h"
#include "metal/atomic.h"
#include "metal/simdgroup_matrix.h"

#define METAL_FUNC inline __attribute__((always_inline))
#define __METAL__ 1
// Apple's compiler defines the MSL version it compiles: 310 for MSL 3.1, the lowest that MLX
// uses (macOS 14; docs/msl-rules.md). metal_sim compiles as that version: code written for a
// newer one behind `#if __METAL_VERSION__ >= 320` is left out, as on the oldest Mac MLX runs on.
#define __METAL_VERSION__ 310

// Half literals: 1.0h. (Metal's `H` and `bf` suffixes are not valid C++ user-defined literals
// in clang; the source rewrite must turn them into `h` / bfloat(x).)
constexpr half operator""h(long double v) { return half(v); }
constexpr half operator""h(unsigned long long v) { return half(v); }

// ---- MSL constants (metal_math / metal_types) -----------------------------------------------------
#define MAXFLOAT __FLT_MAX__
#define HUGE_VALF __builtin_huge_valf()
#define HUGE_VALH half(__builtin_huge_valf())
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define FLT_MAX __FLT_MAX__
#define FLT_MIN __FLT_MIN__
#define FLT_EPSILON __FLT_EPSILON__
#define FLT_DIG __FLT_DIG__
#define FLT_MANT_DIG __FLT_MANT_DIG__
#define FLT_MAX_EXP __FLT_MAX_EXP__
#define FLT_MIN_EXP __FLT_MIN_EXP__
#define FLT_MAX_10_EXP __FLT_MAX_10_EXP__
#define FLT_MIN_10_EXP __FLT_MIN_10_EXP__
#define FLT_RADIX 2
#define HALF_MAX half(65504.0f)
#define MAXHALF HALF_MAX
#define HALF_MIN half(6.103515625e-05f)
#define HALF_EPSILON half(0.0009765625f)
#define HALF_DIG 3
#define HALF_MANT_DIG 11
#define BFLOAT_MAX bfloat(3.38953139e38f)
#define BFLOAT_MIN bfloat(1.17549435e-38f)
#define BFLOAT_EPSILON bfloat(0.0078125f)
#define CHAR_BIT 8
#define SCHAR_MAX 127
#define SCHAR_MIN (-128)
#define UCHAR_MAX 255
#define CHAR_MAX SCHAR_MAX
#define CHAR_MIN SCHAR_MIN
#define SHRT_MAX 32767
#define SHRT_MIN (-32768)
#define USHRT_MAX 65535
#define INT_MAX __INT_MAX__
#define INT_MIN (-__INT_MAX__ - 1)
#define UINT_MAX (__INT_MAX__ * 2U + 1U)
#define LONG_MAX __LONG_MAX__
#define LONG_MIN (-__LONG_MAX__ - 1L)
#define ULONG_MAX (__LONG_MAX__ * 2UL + 1UL)
#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_PI_F 3.14159265358979323846f
#define M_PI_2_F 1.57079632679489661923f
#define M_PI_4_F 0.785398163397448309616f
#define M_1_PI_F 0.318309886183790671538f
#define M_2_PI_F 0.636619772367581343076f
#define M_2_SQRTPI_F 1.12837916709551257390f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f
#define M_E_H half(M_E_F)
#define M_LOG2E_H half(M_LOG2E_F)
#define M_LOG10E_H half(M_LOG10E_F)
#define M_LN2_H half(M_LN2_F)
#define M_LN10_H half(M_LN10_F)
#define M_PI_H half(M_PI_F)
#define M_PI_2_H half(M_PI_2_F)
#define M_PI_4_H half(M_PI_4_F)
#define M_1_PI_H half(M_1_PI_F)
#define M_2_PI_H half(M_2_PI_F)
#define M_2_SQRTPI_H half(M_2_SQRTPI_F)
#define M_SQRT2_H half(M_SQRT2_F)
#define M_SQRT1_2_H half(M_SQRT1_2_F)
