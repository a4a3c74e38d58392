// The entry points every kernel library exports, included last by each generated TU after it
// defined `__kp_entry_body(void**)` (run one thread) and the macros __KP_NEEDS_SYNC and __KP_DIALECT.
#pragma once

__thread __kp_thread __KP_RT* __kp_cur_slot __attribute__((tls_model("initial-exec")));

// The scheduler writes the running thread straight into this library's TLS slot.
extern "C" __kp_thread** __kp_kernel_current_slot(void) { return (__kp_thread**)(void*)&__kp_cur_slot; }
__thread __kp_view __KP_RT* __kp_last_view[4] __attribute__((tls_model("initial-exec")));
extern "C" __kp_view** __kp_kernel_view_slots(void) { return (__kp_view**)(void*)__kp_last_view; }
__thread __kp_tg_check __KP_RT* __kp_tg_state __attribute__((tls_model("initial-exec")));
extern "C" __kp_tg_check** __kp_kernel_tg_slot(void) {
  return (__kp_tg_check**)(void*)&__kp_tg_state;
}
// A checked build's access hooks; apart, they are linked in later (runners/simbuild.py).
#if defined(__KP_INSTRUMENTED) && !defined(__KP_HOOKS_APART)
#include "checks.h"
#endif
extern "C" const int __kp_kernel_needs_sync = __KP_NEEDS_SYNC;
extern "C" const char* const __kp_kernel_dialect = __KP_DIALECT;

extern "C" void __kp_kernel_entry(void** a) { __kp_entry_body(a); }

// Every thread of one group in order, without fibers: for kernels with no barrier or
// collective. `group` arrives with the group-level fields set; thread-level ones are filled here.
extern "C" void __kp_kernel_run_threads(void** a, __kp_thread* group) {
  __kp_thread __KP_RT* const t = (__kp_thread __KP_RT*)group;
  const uint32_t nx = t->tg_size[0], ny = t->tg_size[1], nz = t->tg_size[2];
  const uint32_t n = nx * ny * nz, full = n / __KP_SIMD_WIDTH * __KP_SIMD_WIDTH;
  uint32_t linear = 0;
  __kp_cur = t;
#if __KP_REGIONS  // work-item loops (kport/workitems.h): the body loops over the threads itself
  __kp_entry_body(a);
  return;
#endif
  for (uint32_t z = 0; z < nz; z++)
    for (uint32_t y = 0; y < ny; y++)
      for (uint32_t x = 0; x < nx; x++, linear++) {
        t->tid[0] = x, t->tid[1] = y, t->tid[2] = z;
        *(volatile uint32_t __KP_RT*)&t->linear = linear;  // a crash names it (rt/host.cpp)
        t->lane = linear % __KP_SIMD_WIDTH;
        t->simd = linear / __KP_SIMD_WIDTH;
        t->simd_lanes = linear < full ? __KP_SIMD_WIDTH : n - full;
        __KP_POSITION_SET();
        __kp_entry_body(a);
      }
}
