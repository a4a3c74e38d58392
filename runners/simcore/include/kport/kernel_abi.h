// The entry points every kernel library exports, included last by each generated TU after it
// defined `kp_entry_body(void**)` (run one thread) and the macros KP_NEEDS_SYNC and KP_DIALECT.
#pragma once

__thread kp_thread* kp_cur __attribute__((tls_model("initial-exec")));

// The scheduler writes the running thread straight into this library's TLS slot.
extern "C" kp_thread** kp_kernel_current_slot(void) { return &kp_cur; }
extern "C" const int kp_kernel_needs_sync = KP_NEEDS_SYNC;
extern "C" const char* const kp_kernel_dialect = KP_DIALECT;

extern "C" void kp_kernel_entry(void** a) { kp_entry_body(a); }

// Every thread of one group in order, without fibers: for kernels with no barrier or
// collective. `t` arrives with the group-level fields set; thread-level ones are filled here.
extern "C" void kp_kernel_run_threads(void** a, kp_thread* t) {
  const uint32_t nx = t->tg_size[0], ny = t->tg_size[1], nz = t->tg_size[2];
  const uint32_t n = nx * ny * nz, full = n / KP_SIMD_WIDTH * KP_SIMD_WIDTH;
  uint32_t linear = 0;
  kp_cur = t;
  for (uint32_t z = 0; z < nz; z++)
    for (uint32_t y = 0; y < ny; y++)
      for (uint32_t x = 0; x < nx; x++, linear++) {
        t->tid[0] = x, t->tid[1] = y, t->tid[2] = z;
        t->linear = linear;
        t->lane = linear % KP_SIMD_WIDTH;
        t->simd = linear / KP_SIMD_WIDTH;
        t->simd_lanes = linear < full ? KP_SIMD_WIDTH : n - full;
        kp_entry_body(a);
      }
}
