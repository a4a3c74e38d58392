// kport CUDA dialect shim: lets CUDA kernel source compile as host C++ and run on the fiber
// runtime (rt.h), behaving as on an NVIDIA GPU. Every kernel TU of the CUDA dialect starts with
// this header. Host-side CUDA (launches, cudaMalloc, ...) is not part of the shim.
// Parts (cuda/): vector_types (char1..double4, dim3), rounding (exact conversions), fp16 / bf16 /
// f16_ops.inc (__half, __nv_bfloat16), intrinsics (integer, bit casts, loads, min/max),
// float_intrinsics (fast math, rounding modes, extra math), sync (barriers, warp primitives),
// atomics, cooperative_groups (via <cooperative_groups.h>), math_constants, device_assert;
// sysinclude/ holds the forwarding <cuda_runtime.h>, <cuda_fp16.h>, ... headers.
// Unsupported constructs are listed in runners/simcore/cuda_unsupported.toml.
#pragma once
#pragma clang system_header
// nvcc's device pass defines __CUDACC__; set before any system header so that libc++ spells its
// noinline attribute in the form that survives CUDA's __noinline__ macro (libc++ __config).
#define __CUDACC__ 1
// C headers first: the macros below (printf, assert, __noinline__) must not reach them.
#include <assert.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kport/rt.h>
#include <kport/float_calls.h>

// ---- What the source sees: a device compilation pass of nvcc ------------------------------------
// __CUDA_ARCH__ selects the device paths of host/device code; override with -D__CUDA_ARCH__=...
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 800
#endif
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 8
#define __CUDACC_VER_BUILD__ 0
#define CUDA_VERSION 12080
#define CUDART_VERSION 12080

// ---- Qualifiers ---------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __shared__  // storage of __shared__ variables is rewritten to __kp_tg_alloc before compiling
// __constant__ data is a plain global here: writable, and shared by all blocks of the launch.
#define __constant__
#define __grid_constant__
#define __device_builtin__
#define __cudart_builtin__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __maxnreg__(n)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
// __restrict__ is already a clang keyword.

#include <kport/cuda/vector_types.h>

// ---- Built-in variables: expressions reading the running fiber's position -----------------------
// Work-item loops (kport/workitems.h) declare `__kp_wi_here`, the running work-item's fields
// as a value, in each region, hiding this one, which reads the running thread's record.
struct __kp_wi_none {};
static constexpr __kp_wi_none __kp_wi_here{};
namespace __kp_cuda {
__KP_INLINE uint3 thread_idx(__kp_wi_none) {
  const __kp_thread __KP_RT* t = __kp_cur;
#ifdef __KP_WI_TU  // work-item loops store only the index (a device function called there)
  const uint32_t i = t->linear, nx = t->tg_size[0], ny = t->tg_size[1];
  return uint3{i % nx, i / nx % ny, i / (nx * ny)};
#else
  return uint3{t->tid[0], t->tid[1], t->tid[2]};
#endif
}
__KP_INLINE uint3 block_idx(__kp_wi_none) {
  const __kp_thread __KP_RT* t = __kp_cur;
  return uint3{t->gid[0], t->gid[1], t->gid[2]};
}
__KP_INLINE dim3 block_dim(__kp_wi_none) {
  const __kp_thread __KP_RT* t = __kp_cur;
  return dim3(t->tg_dispatch[0], t->tg_dispatch[1], t->tg_dispatch[2]);
}
__KP_INLINE dim3 grid_dim(__kp_wi_none) {
  const __kp_thread __KP_RT* t = __kp_cur;
  return dim3(t->ngroups[0], t->ngroups[1], t->ngroups[2]);
}
__KP_INLINE uint3 thread_idx(const __kp_thread& t) { return uint3{t.tid[0], t.tid[1], t.tid[2]}; }
__KP_INLINE uint3 block_idx(const __kp_thread& t) { return uint3{t.gid[0], t.gid[1], t.gid[2]}; }
__KP_INLINE dim3 block_dim(const __kp_thread& t) {
  return dim3(t.tg_dispatch[0], t.tg_dispatch[1], t.tg_dispatch[2]);
}
__KP_INLINE dim3 grid_dim(const __kp_thread& t) {
  return dim3(t.ngroups[0], t.ngroups[1], t.ngroups[2]);
}
}  // namespace __kp_cuda
#define threadIdx (::__kp_cuda::thread_idx(__kp_wi_here))
#define blockIdx (::__kp_cuda::block_idx(__kp_wi_here))
#define blockDim (::__kp_cuda::block_dim(__kp_wi_here))
#define gridDim (::__kp_cuda::grid_dim(__kp_wi_here))
// A constant expression here (CUDA's is a run-time variable): more permissive, same value.
inline constexpr int warpSize = 32;

#include <kport/cuda/math_constants.h>
#include <kport/cuda/rounding.h>
#include <kport/cuda/fp16.h>
#include <kport/cuda/bf16.h>
#include <kport/cuda/intrinsics.h>
#include <kport/cuda/float_intrinsics.h>
#include <kport/cuda/sync.h>
#include <kport/cuda/atomics.h>
#include <kport/cuda/host_types.h>
#include <kport/cuda/std_minmax.h>

// ---- Traps, clocks ------------------------------------------------------------------------------
[[noreturn]] __KP_INLINE void __trap(unsigned __kp_line = __builtin_LINE()) {
  __kp_fatal(__KP_F_INVALID, __kp_line, "__trap() called: the kernel aborted");
}
[[noreturn]] __KP_INLINE void __brkpt(unsigned __kp_line = __builtin_LINE()) {
  __kp_fatal(__KP_F_INVALID, __kp_line, "__brkpt() called: the kernel stopped at a breakpoint");
}
// Cycle counters: monotonic per thread, meaningless as GPU timings.
__KP_INLINE long long clock64() { return (long long)__builtin_readcyclecounter(); }

// ---- Casts to vector pointers ------------------------------------------------------------------
// The source rewrite sends reinterpret_cast<float4*>(p) and (float4*)p here: a GPU faults when
// the address is not aligned for the vector type, while on the CPU the load would just work.
namespace __kp_cuda {
template <class P> struct pointee;
template <class T> struct pointee<T*> { using type = T; };
template <class P, class Q>
__KP_INLINE P aligned_ptr_cast(Q q, unsigned __kp_line = __builtin_LINE()) {
  constexpr size_t need = alignof(typename pointee<P>::type);
  if ((uintptr_t)q % need) __kp_report(__KP_F_INVALID, __kp_line, "misaligned vector pointer: the "
                                     "address is not aligned for the vector type (a GPU faults "
                                     "with 'misaligned address' on access)");
  return reinterpret_cast<P>(q);
}
}  // namespace __kp_cuda

// ---- printf and assert inside kernels -----------------------------------------------------------
// Device printf goes to the launch's captured output (std::printf would break; nobody writes it).
#define printf __kp_printf
#include <kport/cuda/device_assert.h>
