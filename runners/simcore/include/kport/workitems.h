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

static inline __attribute__((always_inline)) uint32_t __kp_wi_count(const __kp_thread __KP_RT* g) {
  return g->tg_size[0] * g->tg_size[1] * g->tg_size[2];
}

// Point `g` at thread i of the group: what a fiber's own __kp_thread would hold (through
// __KP_RT, so checked builds do not check kport's own stores).
static inline __attribute__((always_inline)) void __kp_wi_item(__kp_thread __KP_RT* g, uint32_t i) {
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
  __KP_POSITION_SET();
}

// The barrier between two regions: the first live thread stands for the group in a report.
static inline void __kp_wi_sync(__kp_thread __KP_RT* g, const unsigned char __KP_RT* exited,
                                uint32_t n, unsigned line, unsigned column) {
  uint32_t done = 0, first = n;
  for (uint32_t i = 0; i < n; i++) {
    if (exited[i]) done++;
    else if (first == n) first = i;
  }
  if (first < n) __kp_wi_item(g, first);
  __kp_wi_barrier(line, column, n - done, done);
}

// A live local copied from (`in`) or to its thread's slot of a per-thread array. Scalars go
// through __KP_RT, so checked builds do not check these copies; the rest is copied bytewise.
template <class T>
static inline __attribute__((always_inline)) void __kp_wi_in(T* local, const T* slot) {
  if constexpr (__is_scalar(T)) *(__remove_cv(T)*)local = *(const T __KP_RT*)slot;
  else __builtin_memcpy((void*)local, (const void*)slot, sizeof(T));
}
template <class T>
static inline __attribute__((always_inline)) void __kp_wi_out(T* slot, const T* local) {
  if constexpr (__is_scalar(T)) *(__remove_cv(T) __KP_RT*)slot = *local;
  else __builtin_memcpy((void*)slot, (const void*)local, sizeof(T));
}
