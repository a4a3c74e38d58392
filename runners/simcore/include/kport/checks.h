// Checked builds (-fsanitize=thread): the access hooks clang calls, defined in the kernel
// library itself so that the second compile step (runners/simbuild.py) inlines them. An
// in-bounds access to the buffer the thread's last read or write hit only widens that
// buffer's extents; a whole-word access to threadgroup memory that needs no report (inside one
// variable, no other thread's access since the last barrier, written before a read) only
// updates its word's record. Everything else (other buffers, races, uninitialised reads, words
// accessed in parts, misalignment, counting) is decided by the runtime (__kp_access,
// rt/checks.cpp). Their own memory accesses go through __KP_RT, so they are not instrumented.
#pragma once

// off / A, with off's remainder rotated into the top bits: below M / A exactly when off is a
// multiple of A and below M (M a multiple of A). One compare checks alignment and range.
template <unsigned A>
static inline __attribute__((always_inline)) uintptr_t __kp_rot(uintptr_t off) {
  constexpr unsigned s = A == 16 ? 4 : A == 8 ? 3 : A == 4 ? 2 : A == 2 ? 1 : 0;
  if constexpr (s == 0) return off;
  else return off >> s | off << (64 - s);
}

// The race and uninitialised-read records of N / 4 words at r: true when the access needs no
// report (they are updated then), false when the runtime must decide.
template <unsigned N, bool WRITE>
static inline __attribute__((always_inline)) bool __kp_tg_track(__kp_tg_word __KP_RT* r,
                                                                const __kp_tg_check __KP_RT* c) {
  const uint32_t first = c->group_epoch, epoch = c->epoch, me = __kp_cur->linear;
  const uint16_t me1 = (uint16_t)(me + 1);
  for (unsigned k = 0; k < N / 4; k++) {
    if (r[k].w_epoch == epoch ? r[k].w_thread != me1 : (!WRITE && r[k].w_epoch < first))
      return false;
    if (WRITE && r[k].r_epoch == epoch && r[k].r_thread != me1) return false;
  }
  // Without fibers (thread and work-item loops) no SIMD-group collective runs: every SIMD
  // group's sync count stays 0, as the records' do, so there is none to read or store.
  const uint32_t se =
      __KP_NEEDS_SYNC ? ((const uint32_t __KP_RT*)c->simd_epoch)[me / __KP_SIMD_WIDTH] : 0;
  for (unsigned k = 0; k < N / 4; k++) {
    if (WRITE) {
      r[k].w_epoch = epoch, r[k].w_thread = me1;
      if (__KP_NEEDS_SYNC) r[k].w_simd = se;
    } else {  // a second reader in the interval makes it "several" (0xFFFF)
      const bool other = (r[k].r_epoch == epoch) & (r[k].r_thread != me1);
      r[k].r_epoch = epoch, r[k].r_thread = other ? 0xFFFF : me1;
      if (__KP_NEEDS_SYNC) r[k].r_simd = se;
      if (other && r[k].w_epoch != epoch) r[k].shared = epoch;  // written before this interval
    }
  }
  return true;
}

// Threadgroup memory, N >= 4 bytes at p: true when the access needs nothing more.
template <unsigned N, bool WRITE, bool ALIGNED>
static inline __attribute__((always_inline)) bool __kp_tg_settled(uintptr_t p) {
  if constexpr (N < 4) {
    return false;
  } else {
    const __kp_tg_check __KP_RT* c = *(__kp_tg_check __KP_RT* __KP_RT*)&__kp_tg_state;
    const uintptr_t off = p - c->arena;  // the words array has 4 words to spare past the end
    constexpr unsigned A = ALIGNED ? N : 4;  // c->bytes is a multiple of 16
    if (__kp_rot<A>(off) >= c->bytes / A) return false;
    __kp_tg_word __KP_RT* r = (__kp_tg_word __KP_RT*)c->words + off / 4;
    if constexpr (!WRITE) {  // most reads of a word many threads read (a matmul's tiles)
      bool shared = true;
      for (unsigned k = 0; k < N / 4; k++) shared &= r[k].shared == c->epoch;
      if (shared) return true;
    }
    const uint32_t first = c->group_epoch;
    for (unsigned k = 0; k < N / 4; k++)
      if (r[k].slow >= first) return false;
    if (!c->track) return true;
    return __kp_tg_track<N, WRITE>(r, c);
  }
}

// A buffer, N bytes at p: true when the access lies in the buffer the last read (or write)
// hit (K = 0) or the one before (K = 2) and may be made there; its extents are widened.
// Aligned: within the buffer and a multiple of N from its start (64-byte aligned) is one
// compare, a multiple of N below the size rounded down to N being exactly the offsets whose
// N bytes fit.
template <unsigned N, bool WRITE, bool ALIGNED, unsigned K>
static inline __attribute__((always_inline)) bool __kp_view_settled(uintptr_t p) {
  __kp_view __KP_RT* v = ((__kp_view __KP_RT* __KP_RT*)__kp_last_view)[K + WRITE];
  const uintptr_t off = p - v->data, size = v->size[WRITE];
  if (ALIGNED ? __kp_rot<N>(off) >= size / N : !(off < size && N - 1 < size - off))
    return false;
  if ((int64_t)off < v->lo[WRITE]) v->lo[WRITE] = (int64_t)off;
  if ((int64_t)(off + N) > v->hi[WRITE]) v->hi[WRITE] = (int64_t)(off + N);
  return true;
}

// __KP_TG_FIRST (runners/simbuild.py: the kernel declares threadgroup variables): threadgroup
// memory is tried before the last buffer, which costs a kernel without any a little.
#ifndef __KP_TG_FIRST
#define __KP_TG_FIRST 0
#endif
// What follows a miss of the last buffer, out of line: one copy per kind of access, not one
// inlined at every access (a checked build's second compile step took about a third longer
// with it inlined; with the buffer before the last tried inline too, a CUB kernel's took a
// sixth longer, and the simulated kernels ran no faster). Its return address locates the
// access, so no two call sites may be merged.
template <unsigned N, bool WRITE, bool ALIGNED>
static __attribute__((noinline, nomerge)) void __kp_access_rest(void* p) {
  if (__kp_view_settled<N, WRITE, ALIGNED, 2>((uintptr_t)p)) return;
  if (!__KP_TG_FIRST && __kp_tg_settled<N, WRITE, ALIGNED>((uintptr_t)p)) return;
  __kp_access(p, N, WRITE, ALIGNED, __builtin_return_address(0));
}
// Compiled apart (__KP_HOOKS_APART, runners/simbuild.py checks_bitcode), a hook the kernel does
// not call is left out of its library; compiled in the kernel's TU, each must be kept (`used`)
// until the instrumentation, which runs last, has inserted the calls.
#ifdef __KP_HOOKS_APART
#define __KP_HOOK_ATTRS visibility("hidden"), always_inline
#else
#define __KP_HOOK_ATTRS visibility("hidden"), always_inline, used
#endif
#define __KP_CHECK_HOOK(NAME, N, WRITE, ALIGNED)                                              \
  extern "C" __attribute__((__KP_HOOK_ATTRS)) void NAME(void* p) {                             \
    const uintptr_t a = (uintptr_t)p;                                                        \
    if (__KP_TG_FIRST && __kp_tg_settled<N, WRITE, ALIGNED>(a)) return;                      \
    if (__builtin_expect(__kp_view_settled<N, WRITE, ALIGNED, 0>(a), 1)) return;             \
    __kp_access_rest<N, WRITE, ALIGNED>(p);                                                  \
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
#undef __KP_HOOK_ATTRS
