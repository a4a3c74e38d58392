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

// The group's fields, read once into a plain struct (registers): the work-items' own fields
// are computed from them, so kernel stores that might alias kport's memory force no reloads.
// `rx`, `ry`: 2^32 / the group's width and height, rounded up (divisions by a multiply).
struct __kp_wi_grp {
  __kp_thread t;
  uint64_t rx, ry;
};
static inline __attribute__((always_inline)) __kp_wi_grp __kp_wi_group(
    const __kp_thread __KP_RT* g) {
  __kp_wi_grp l;
  for (unsigned k = 0; k < sizeof(__kp_thread) / 4; k++)
    ((uint32_t*)&l.t)[k] = ((const uint32_t __KP_RT*)g)[k];
  l.rx = ((1ull << 32) + l.t.tg_size[0] - 1) / l.t.tg_size[0];
  l.ry = ((1ull << 32) + l.t.tg_size[1] - 1) / l.t.tg_size[1];
  return l;
}

// Work-item i of the group: what a fiber's own __kp_thread would hold, as a value. Only its
// index is stored in the running thread's record `g` (what the checks' hooks read; findings
// and crashes derive its other fields from it: rt/host.cpp), one store an item, volatile so
// that the compiler neither sinks it out of the loop nor drops it (a crash reads it).
static inline __attribute__((always_inline)) __kp_thread __kp_wi_item(
    const __kp_wi_grp& gl, __kp_thread __KP_RT* g, uint32_t i) {
  *(volatile uint32_t __KP_RT*)&g->linear = i;
  __KP_POSITION_SET();
  const uint32_t nx = gl.t.tg_size[0], ny = gl.t.tg_size[1];
  const uint32_t n = nx * ny * gl.t.tg_size[2], full = n / __KP_SIMD_WIDTH * __KP_SIMD_WIDTH;
  __kp_thread t = gl.t;
  t.linear = i;
  t.lane = i % __KP_SIMD_WIDTH;
  t.simd = i / __KP_SIMD_WIDTH;
  t.simd_lanes = i < full ? __KP_SIMD_WIDTH : n - full;
  if (ny * gl.t.tg_size[2] == 1) {
    t.tid[0] = i, t.tid[1] = 0, t.tid[2] = 0;
  } else {  // exact for i < 2^22 (groups have at most 1024 threads)
    const uint32_t row = (uint32_t)(i * gl.rx >> 32), plane = (uint32_t)(row * gl.ry >> 32);
    t.tid[0] = i - row * nx, t.tid[1] = row - plane * ny, t.tid[2] = plane;
  }
  return t;
}

// The barrier between two regions. `done` threads returned (their flags are set in `exited`);
// the first live thread stands for the group in a report.
static inline void __kp_wi_sync(__kp_thread __KP_RT* g, const unsigned char __KP_RT* exited,
                                uint32_t n, uint32_t done, unsigned line, unsigned column) {
  uint32_t first = 0;
  while (done && first < n && exited[first]) first++;
  if (first < n) g->linear = first;
  __kp_wi_barrier(line, column, n - done, done);
}

// Classes and arrays: checked builds copy them in a function the instrumentation leaves alone
// (a memcpy it saw made two runtime calls: about a tenth of FlashAttention's time, whose three
// 32-float arrays live across its barriers); neither side is memory a check or counter is about.
#ifdef __KP_INSTRUMENTED
static __KP_NOSAN __attribute__((noinline)) void __kp_wi_copy(void* to, const void* from,
                                                             size_t n) {
  __builtin_memcpy(to, from, n);
}
#else
#define __kp_wi_copy __builtin_memcpy
#endif

// A live local copied from (`in`) or to its thread's slot of a per-thread array: the thread's
// own variable and kport's memory, so checked builds check neither side. Scalars and vectors
// (Metal's uint2, float4, ...) go through __KP_RT, classes and arrays through __kp_wi_copy.
#define __KP_WI_PLAIN(T) (!__is_class(T) && !__is_union(T) && !__is_array(T))
template <class T>
static inline __attribute__((always_inline)) void __kp_wi_in(T* local, const T* slot) {
  if constexpr (__KP_WI_PLAIN(T)) *(__remove_cv(T)*)local = *(const T __KP_RT*)slot;
  else __kp_wi_copy((void*)local, (const void*)slot, sizeof(T));
}
template <class T>
static inline __attribute__((always_inline)) void __kp_wi_out(T* slot, const T* local) {
  if constexpr (__KP_WI_PLAIN(T)) *(__remove_cv(T) __KP_RT*)slot = *local;
  else __kp_wi_copy((void*)slot, (const void*)local, sizeof(T));
}
#undef __KP_WI_PLAIN
