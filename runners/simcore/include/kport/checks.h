// Checked builds (-fsanitize=thread): the access hooks clang calls, defined in the kernel
// library itself so that the second compile step (runners/simbuild.py) inlines them. An
// in-bounds access to the buffer the thread's last read or write hit only widens that
// buffer's extents; everything else (other buffers, threadgroup memory, races, uninitialised
// reads, misalignment, counting) is decided by the runtime (__kp_access, rt/checks.cpp).
// Their own memory accesses go through __KP_RT, so they are not instrumented themselves.
#pragma once

#define __KP_CHECK_HOOK(NAME, N, WRITE, ALIGNED)                                              \
  extern "C" __attribute__((visibility("hidden"), always_inline, used)) void NAME(void* p) {   \
    __kp_view __KP_RT* v = ((__kp_view __KP_RT* __KP_RT*)__kp_last_view)[WRITE];              \
    const uintptr_t off = (uintptr_t)p - v->data;                                            \
    if (__builtin_expect(off < v->bytes && (N) - 1 < v->bytes - off &&                        \
                         (!(WRITE) || v->writable) &&                                         \
                         (!(ALIGNED) || ((uintptr_t)p & ((N) - 1)) == 0), 1)) {               \
      if ((int64_t)off < v->lo[WRITE]) v->lo[WRITE] = (int64_t)off;                          \
      if ((int64_t)(off + (N)) > v->hi[WRITE]) v->hi[WRITE] = (int64_t)(off + (N));           \
      return;                                                                                \
    }                                                                                        \
    __kp_access(p, N, WRITE, ALIGNED);                                                       \
  }
#define __KP_CHECK_HOOKS(N)                                    \
  __KP_CHECK_HOOK(__tsan_read##N, N, 0, 1)                     \
  __KP_CHECK_HOOK(__tsan_write##N, N, 1, 1)                    \
  __KP_CHECK_HOOK(__tsan_unaligned_read##N, N, 0, 0)           \
  __KP_CHECK_HOOK(__tsan_unaligned_write##N, N, 1, 0)
__KP_CHECK_HOOKS(1)
__KP_CHECK_HOOKS(2)
__KP_CHECK_HOOKS(4)
__KP_CHECK_HOOKS(8)
__KP_CHECK_HOOKS(16)
#undef __KP_CHECK_HOOKS
#undef __KP_CHECK_HOOK
