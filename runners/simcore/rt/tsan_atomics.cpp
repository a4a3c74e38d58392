// Atomic hooks of checked builds. Clang's thread-sanitizer pass turns every atomic operation
// (also those inlined from the shims) into a __tsan_atomic* call; we perform the operation and
// check its address like any other access, without TSan's runtime.
#include <stdint.h>

#include "../include/kport/rt.h"

#define __KP_ATOMIC_OPS(N, T)                                                                    \
  T __tsan_atomic##N##_load(const volatile T* a, int) {                                        \
    __kp_check_access((const void*)a, sizeof(T), 0, 0);                                          \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                               \
  }                                                                                            \
  void __tsan_atomic##N##_store(volatile T* a, T v, int) {                                     \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                  \
  }                                                                                            \
  T __tsan_atomic##N##_exchange(volatile T* a, T v, int) {                                     \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                        \
  }                                                                                            \
  T __tsan_atomic##N##_fetch_add(volatile T* a, T v, int) {                                    \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                         \
  }                                                                                            \
  T __tsan_atomic##N##_fetch_sub(volatile T* a, T v, int) {                                    \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                         \
  }                                                                                            \
  T __tsan_atomic##N##_fetch_and(volatile T* a, T v, int) {                                    \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                         \
  }                                                                                            \
  T __tsan_atomic##N##_fetch_or(volatile T* a, T v, int) {                                     \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                          \
  }                                                                                            \
  T __tsan_atomic##N##_fetch_xor(volatile T* a, T v, int) {                                    \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                         \
  }                                                                                            \
  T __tsan_atomic##N##_fetch_nand(volatile T* a, T v, int) {                                   \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                        \
  }                                                                                            \
  int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {         \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);    \
  }                                                                                            \
  int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {           \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);    \
  }                                                                                            \
  T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {               \
    __kp_check_access((const void*)a, sizeof(T), 1, 0);                                          \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);          \
    return c;                                                                                  \
  }

extern "C" {
__KP_ATOMIC_OPS(8, uint8_t)
__KP_ATOMIC_OPS(16, uint16_t)
__KP_ATOMIC_OPS(32, uint32_t)
__KP_ATOMIC_OPS(64, uint64_t)
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}
