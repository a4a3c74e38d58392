// Work-item loops (runners/workitems.py): a kernel whose barriers all sit where every thread of
// the group provably reaches them runs once per group, looping over the group's threads between
// barriers. These are the calls its rewritten body makes; `g` is the running group's
// __kp_thread, whose thread fields each loop sets for the thread it runs.
#pragma once

extern "C" {
// A per-thread array: n elements of `size` bytes, valid until the group ends.
void* __kp_wi_alloc(size_t size, size_t align, uint32_t n);
// One zeroed flag a thread: set when the thread returned.
unsigned char* __kp_wi_flags(uint32_t n);
// A barrier reached by `live` threads while `done` had returned (reported as divergence when
// both are nonzero, as a fiber barrier is); starts a new race-check epoch.
void __kp_wi_barrier(unsigned line, unsigned column, uint32_t live, uint32_t done);
}

static inline __attribute__((always_inline)) uint32_t __kp_wi_count(const __kp_thread* g) {
  return g->tg_size[0] * g->tg_size[1] * g->tg_size[2];
}

// Point `g` at thread i of the group: what a fiber's own __kp_thread would hold. Checked
// builds call it out of line, uninstrumented: its stores are kport's, not the kernel's.
#ifdef __KP_INSTRUMENTED
#define __KP_WI_ITEM static __attribute__((noinline, no_sanitize("thread")))
#else
#define __KP_WI_ITEM static inline __attribute__((always_inline))
#endif
__KP_WI_ITEM void __kp_wi_item(__kp_thread* g, uint32_t i) {
  const uint32_t nx = g->tg_size[0], ny = g->tg_size[1];
  const uint32_t n = nx * ny * g->tg_size[2], full = n / __KP_SIMD_WIDTH * __KP_SIMD_WIDTH;
  g->linear = i;
  g->lane = i % __KP_SIMD_WIDTH;
  g->simd = i / __KP_SIMD_WIDTH;
  g->simd_lanes = i < full ? __KP_SIMD_WIDTH : n - full;
  if (ny * g->tg_size[2] == 1) {
    g->tid[0] = i, g->tid[1] = 0, g->tid[2] = 0;
  } else {
    g->tid[0] = i % nx, g->tid[1] = (i / nx) % ny, g->tid[2] = i / (nx * ny);
  }
}

// The barrier between two regions: the first live thread stands for the group in a report.
static inline void __kp_wi_sync(__kp_thread* g, const unsigned char* exited, uint32_t n,
                                unsigned line, unsigned column) {
  uint32_t done = 0, first = n;
  for (uint32_t i = 0; i < n; i++) {
    if (exited[i]) done++;
    else if (first == n) first = i;
  }
  if (first < n) __kp_wi_item(g, first);
  __kp_wi_barrier(line, column, n - done, done);
}
