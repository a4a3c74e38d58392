// CUDA vector types (char1..double4, dim3) with CUDA's sizes and alignments on LP64 Linux.
// CUDA defines no arithmetic operators on them; user code often defines its own, so neither do we.
#pragma once
#pragma clang system_header
#include <kport/rt.h>

// Declares NAME1..NAME4 over scalar T with the given alignments, plus make_NAMEn().
#define __KP_VEC_FAMILY(NAME, T, A1, A2, A3, A4)                                                     \
  struct alignas(A1) NAME##1 { T x; };                                                             \
  struct alignas(A2) NAME##2 { T x, y; };                                                          \
  struct alignas(A3) NAME##3 { T x, y, z; };                                                       \
  struct alignas(A4) NAME##4 { T x, y, z, w; };                                                    \
  __KP_INLINE constexpr NAME##1 make_##NAME##1(T x) { return NAME##1 {x}; }                          \
  __KP_INLINE constexpr NAME##2 make_##NAME##2(T x, T y) { return NAME##2 {x, y}; }                  \
  __KP_INLINE constexpr NAME##3 make_##NAME##3(T x, T y, T z) { return NAME##3 {x, y, z}; }          \
  __KP_INLINE constexpr NAME##4 make_##NAME##4(T x, T y, T z, T w) { return NAME##4 {x, y, z, w}; }

// CUDA 13 splits the 32-byte 4-vectors into 16- and 32-byte aligned variants; the plain name
// keeps the 16-byte alignment of earlier releases.
#define __KP_VEC_WIDE4(NAME, T)                                                                      \
  struct alignas(16) NAME##4_16a { T x, y, z, w; };                                                \
  struct alignas(32) NAME##4_32a { T x, y, z, w; };                                                \
  __KP_INLINE constexpr NAME##4_16a make_##NAME##4_16a(T x, T y, T z, T w) { return {x, y, z, w}; }  \
  __KP_INLINE constexpr NAME##4_32a make_##NAME##4_32a(T x, T y, T z, T w) { return {x, y, z, w}; }

__KP_VEC_FAMILY(char, signed char, 1, 2, 1, 4)
__KP_VEC_FAMILY(uchar, unsigned char, 1, 2, 1, 4)
__KP_VEC_FAMILY(short, short, 2, 4, 2, 8)
__KP_VEC_FAMILY(ushort, unsigned short, 2, 4, 2, 8)
__KP_VEC_FAMILY(int, int, 4, 8, 4, 16)
__KP_VEC_FAMILY(uint, unsigned int, 4, 8, 4, 16)
__KP_VEC_FAMILY(long, long, 8, 16, 8, 16)
__KP_VEC_FAMILY(ulong, unsigned long, 8, 16, 8, 16)
__KP_VEC_FAMILY(longlong, long long, 8, 16, 8, 16)
__KP_VEC_FAMILY(ulonglong, unsigned long long, 8, 16, 8, 16)
__KP_VEC_FAMILY(float, float, 4, 8, 4, 16)
__KP_VEC_FAMILY(double, double, 8, 16, 8, 16)
__KP_VEC_WIDE4(long, long)
__KP_VEC_WIDE4(ulong, unsigned long)
__KP_VEC_WIDE4(longlong, long long)
__KP_VEC_WIDE4(ulonglong, unsigned long long)
__KP_VEC_WIDE4(double, double)
#undef __KP_VEC_FAMILY
#undef __KP_VEC_WIDE4

// Launch geometry type: unspecified components default to 1, as in CUDA.
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

static_assert(sizeof(float3) == 12 && alignof(float3) == 4, "CUDA float3 layout");
static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "CUDA float4 layout");
static_assert(sizeof(double4) == 32 && alignof(double4) == 16, "CUDA double4 layout");
static_assert(sizeof(dim3) == 12 && alignof(dim3) == 4, "CUDA dim3 layout");
