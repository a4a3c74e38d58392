// CUDA atomics and memory fences as real host atomics: blocks run concurrently on OS threads.
// CUDA's atomic* are relaxed read-modify-writes; the _block and _system scopes are aliases. Under
// ThreadSanitizer builds (__KP_INSTRUMENTED) the functions are left uninstrumented (TSan would
// still route their atomics through the __tsan_atomic* hooks under no_sanitize alone) and report
// their access, with the caller's line, through __kp_check_access instead.
#pragma once
#pragma clang system_header
#include <kport/rt.h>
#include <kport/cuda/bf16.h>
#include <kport/cuda/fp16.h>
#include <kport/cuda/vector_types.h>

#ifdef __KP_INSTRUMENTED
// An uninstrumented function cannot be force-inlined into an instrumented caller.
#define __KP_ATOMIC_FN __KP_NOSAN __attribute__((disable_sanitizer_instrumentation)) inline
#define __KP_ATOMIC_SITE , unsigned __kp_line = __builtin_LINE()
#define __KP_ATOMIC_CHECK(p) __kp_check_access((const void*)(p), sizeof(*(p)), 1, __kp_line)
#else
#define __KP_ATOMIC_FN __KP_INLINE
#define __KP_ATOMIC_SITE
#define __KP_ATOMIC_CHECK(p) ((void)0)
#endif

// ---- Fences -------------------------------------------------------------------------------------
__KP_ATOMIC_FN void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
__KP_ATOMIC_FN void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
__KP_ATOMIC_FN void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

namespace __kp_cuda {
// Compare-and-swap loop applying f to the old value; returns the old value.
template <class T, class F>
__KP_ATOMIC_FN T atomic_update(T* p, F f) {
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  T next = f(old);
  while (!__atomic_compare_exchange(p, &old, &next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    next = f(old);
  return old;
}
}  // namespace __kp_cuda

#define __KP_ATOMIC(RET, NAME, PARAMS, ...) __KP_ATOMIC_FN RET NAME PARAMS __VA_ARGS__

#define __KP_ATOMIC_RMW(NAME, T, BUILTIN)                                                            \
  __KP_ATOMIC(T, NAME, (T * address, T val __KP_ATOMIC_SITE), {                                        \
    __KP_ATOMIC_CHECK(address);                                                                      \
    return BUILTIN(address, val, __ATOMIC_RELAXED);                                                \
  })

__KP_ATOMIC_RMW(atomicAdd, int, __atomic_fetch_add)
__KP_ATOMIC_RMW(atomicAdd, unsigned int, __atomic_fetch_add)
__KP_ATOMIC_RMW(atomicAdd, unsigned long long, __atomic_fetch_add)
__KP_ATOMIC_RMW(atomicAdd, float, __atomic_fetch_add)
__KP_ATOMIC_RMW(atomicAdd, double, __atomic_fetch_add)
__KP_ATOMIC_RMW(atomicSub, int, __atomic_fetch_sub)
__KP_ATOMIC_RMW(atomicSub, unsigned int, __atomic_fetch_sub)
__KP_ATOMIC_RMW(atomicMin, int, __atomic_fetch_min)
__KP_ATOMIC_RMW(atomicMin, unsigned int, __atomic_fetch_min)
__KP_ATOMIC_RMW(atomicMin, long long, __atomic_fetch_min)
__KP_ATOMIC_RMW(atomicMin, unsigned long long, __atomic_fetch_min)
__KP_ATOMIC_RMW(atomicMax, int, __atomic_fetch_max)
__KP_ATOMIC_RMW(atomicMax, unsigned int, __atomic_fetch_max)
__KP_ATOMIC_RMW(atomicMax, long long, __atomic_fetch_max)
__KP_ATOMIC_RMW(atomicMax, unsigned long long, __atomic_fetch_max)
__KP_ATOMIC_RMW(atomicAnd, int, __atomic_fetch_and)
__KP_ATOMIC_RMW(atomicAnd, unsigned int, __atomic_fetch_and)
__KP_ATOMIC_RMW(atomicAnd, unsigned long long, __atomic_fetch_and)
__KP_ATOMIC_RMW(atomicOr, int, __atomic_fetch_or)
__KP_ATOMIC_RMW(atomicOr, unsigned int, __atomic_fetch_or)
__KP_ATOMIC_RMW(atomicOr, unsigned long long, __atomic_fetch_or)
__KP_ATOMIC_RMW(atomicXor, int, __atomic_fetch_xor)
__KP_ATOMIC_RMW(atomicXor, unsigned int, __atomic_fetch_xor)
__KP_ATOMIC_RMW(atomicXor, unsigned long long, __atomic_fetch_xor)
#undef __KP_ATOMIC_RMW

#define __KP_ATOMIC_EXCH(T)                                                                          \
  __KP_ATOMIC(T, atomicExch, (T * address, T val __KP_ATOMIC_SITE), {                                  \
    __KP_ATOMIC_CHECK(address);                                                                      \
    T old;                                                                                         \
    __atomic_exchange(address, &val, &old, __ATOMIC_RELAXED);                                      \
    return old;                                                                                    \
  })
__KP_ATOMIC_EXCH(int)
__KP_ATOMIC_EXCH(unsigned int)
__KP_ATOMIC_EXCH(unsigned long long)
__KP_ATOMIC_EXCH(float)
#undef __KP_ATOMIC_EXCH

#define __KP_ATOMIC_CAS(T)                                                                           \
  __KP_ATOMIC(T, atomicCAS, (T * address, T compare, T val __KP_ATOMIC_SITE), {                        \
    __KP_ATOMIC_CHECK(address);                                                                      \
    __atomic_compare_exchange(address, &compare, &val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return compare;                                                                                \
  })
__KP_ATOMIC_CAS(int)
__KP_ATOMIC_CAS(unsigned int)
__KP_ATOMIC_CAS(unsigned long long)
__KP_ATOMIC_CAS(unsigned short)
#undef __KP_ATOMIC_CAS

// Wrapping counters: atomicInc resets to 0 past val, atomicDec reloads val at 0 or above val.
__KP_ATOMIC(unsigned int, atomicInc, (unsigned int* address, unsigned int val __KP_ATOMIC_SITE), {
  __KP_ATOMIC_CHECK(address);
  return __kp_cuda::atomic_update(address,
                                [val](unsigned int old) { return old >= val ? 0u : old + 1; });
})
__KP_ATOMIC(unsigned int, atomicDec, (unsigned int* address, unsigned int val __KP_ATOMIC_SITE), {
  __KP_ATOMIC_CHECK(address);
  return __kp_cuda::atomic_update(
      address, [val](unsigned int old) { return (old == 0 || old > val) ? val : old - 1; });
})

// Half-precision adds round like __hadd; a __half2 add is atomic per 32-bit word here (CUDA only
// promises each half separately).
#define __KP_ATOMIC_ADD16(T, ADD)                                                                    \
  __KP_ATOMIC(T, atomicAdd, (T * address, T val __KP_ATOMIC_SITE), {                                   \
    __KP_ATOMIC_CHECK(address);                                                                      \
    return __kp_cuda::atomic_update(address, [val](T old) { return ADD(old, val); });                \
  })
__KP_ATOMIC_ADD16(__half, __hadd)
__KP_ATOMIC_ADD16(__half2, __hadd2)
__KP_ATOMIC_ADD16(__nv_bfloat16, __hadd)
__KP_ATOMIC_ADD16(__nv_bfloat162, __hadd2)
#undef __KP_ATOMIC_ADD16

// sm_90 vector float adds: atomic per component, as documented.
__KP_ATOMIC(float2, atomicAdd, (float2 * address, float2 val __KP_ATOMIC_SITE), {
  __KP_ATOMIC_CHECK(address);
  return make_float2(__atomic_fetch_add(&address->x, val.x, __ATOMIC_RELAXED),
                     __atomic_fetch_add(&address->y, val.y, __ATOMIC_RELAXED));
})
__KP_ATOMIC(float4, atomicAdd, (float4 * address, float4 val __KP_ATOMIC_SITE), {
  __KP_ATOMIC_CHECK(address);
  return make_float4(__atomic_fetch_add(&address->x, val.x, __ATOMIC_RELAXED),
                     __atomic_fetch_add(&address->y, val.y, __ATOMIC_RELAXED),
                     __atomic_fetch_add(&address->z, val.z, __ATOMIC_RELAXED),
                     __atomic_fetch_add(&address->w, val.w, __ATOMIC_RELAXED));
})
#undef __KP_ATOMIC

// The _block and _system scopes are the same operations on a host: one definition each.
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicSub_block atomicSub
#define atomicSub_system atomicSub
#define atomicExch_block atomicExch
#define atomicExch_system atomicExch
#define atomicMin_block atomicMin
#define atomicMin_system atomicMin
#define atomicMax_block atomicMax
#define atomicMax_system atomicMax
#define atomicInc_block atomicInc
#define atomicInc_system atomicInc
#define atomicDec_block atomicDec
#define atomicDec_system atomicDec
#define atomicCAS_block atomicCAS
#define atomicCAS_system atomicCAS
#define atomicAnd_block atomicAnd
#define atomicAnd_system atomicAnd
#define atomicOr_block atomicOr
#define atomicOr_system atomicOr
#define atomicXor_block atomicXor
#define atomicXor_system atomicXor
