// Full checks. Kernels built in checked mode are compiled with -fsanitize=thread, which makes
// clang call __tsan_* hooks on every memory access; we define those hooks here (TSan's own runtime
// is never linked) to check bounds of buffers and threadgroup variables, threadgroup-memory races
// between two barriers, and reads of threadgroup memory no thread of the group has written.
#include <stdio.h>
#include <string.h>

#include "runtime.h"

namespace __kp {

static uintptr_t g_span_lo = ~(uintptr_t)0, g_span_hi = 0;

Arg* buffer_of(uintptr_t addr) {
  if (g_span_hi == 0) {
    for (const Arg& a : g_launch.args) {
      if (!a.is_buffer) continue;
      if ((uintptr_t)a.map < g_span_lo) g_span_lo = (uintptr_t)a.map;
      if ((uintptr_t)(a.map + a.map_bytes) > g_span_hi) g_span_hi = (uintptr_t)(a.map + a.map_bytes);
    }
  }
  if (addr < g_span_lo || addr >= g_span_hi) return nullptr;
  for (Arg& a : g_launch.args)
    if (a.is_buffer && addr >= (uintptr_t)a.map && addr < (uintptr_t)(a.map + a.map_bytes))
      return &a;
  return nullptr;
}

// Extents: OS threads race here, so relaxed CAS loops, which write only when the access lies
// outside what is already recorded.
static inline void lower_to(int64_t* at, int64_t v) {
  int64_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);
  while (v < cur &&
         !__atomic_compare_exchange_n(at, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

static inline void raise_to(int64_t* at, int64_t v) {
  int64_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);
  while (v > cur &&
         !__atomic_compare_exchange_n(at, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

static void report_buffer_oob(const Arg* b, uintptr_t a, bool write, void* pc, unsigned line) {
  long long index = ((long long)a - (long long)(uintptr_t)b->data) / (long long)b->elem_size;
  char msg[256];
  snprintf(msg, sizeof msg, "out-of-bounds %s of buffer '%s' at element %lld (valid 0..%zu)",
           write ? "write" : "read", b->name.c_str(), index, b->bytes / b->elem_size - 1);
  const __kp_thread* where = t_worker && t_worker->running ? &t_worker->running->pos : nullptr;
  add_finding(__KP_F_OOB, line, msg, where, pc);
}

static const TgVar* tg_var_at(const Worker* w, size_t off, const TgVar** before) {
  *before = nullptr;
  for (const TgVar& v : w->tg_vars) {
    if (off >= v.offset && off < v.offset + v.size) return &v;
    if (v.offset <= off) *before = &v;
  }
  return nullptr;
}

// Accesses by two threads conflict unless a barrier, or a SIMD-group sync of their common SIMD
// group, separates them.
static bool conflicts(const Worker* w, uint32_t me, uint16_t other, uint32_t other_simd_epoch) {
  if (other == 0xFFFF) return true;
  uint32_t s = me / __KP_SIMD_WIDTH;
  if ((uint32_t)(other - 1) / __KP_SIMD_WIDTH != s) return true;
  return w->simd_epoch[s] == other_simd_epoch;
}

static void tg_access(Worker* w, size_t off, size_t n, bool write, void* pc, unsigned line) {
  const TgVar* before;
  const TgVar* var = tg_var_at(w, off, &before);
  const __kp_thread* where = &w->running->pos;
  char msg[320];
  if (!var) {
    if (before)
      snprintf(msg, sizeof msg, "out-of-bounds %s of threadgroup variable '%s': byte %zu of a "
               "%zu-byte variable", write ? "write" : "read", before->name.c_str(),
               off - before->offset, before->size);
    else
      snprintf(msg, sizeof msg, "out-of-bounds %s before the first threadgroup variable",
               write ? "write" : "read");
    add_finding(__KP_F_OOB, line, msg, where, pc);  // line 0: the access (pc) locates it
    return;
  }
  uint32_t me = w->running->pos.linear;
  uint16_t me1 = (uint16_t)(me + 1);
  uint32_t se = w->simd_epoch[me / __KP_SIMD_WIDTH];
  for (size_t i = 0; i < n && off + i < w->tg_capacity; i++) {
    Shadow& sh = w->shadow[off + i];
    const char* kind = nullptr;
    unsigned other = 0;
    if (write) {
      if (sh.w_epoch == w->epoch && sh.w_thread != me1 && conflicts(w, me, sh.w_thread, sh.w_simd_epoch))
        kind = "written by thread %u and thread %u", other = sh.w_thread - 1;
      else if (sh.r_epoch == w->epoch && sh.r_thread != me1 &&
               conflicts(w, me, sh.r_thread, sh.r_simd_epoch))
        kind = "read by thread %u and written by thread %u", other = sh.r_thread - 1;
      sh.w_epoch = w->epoch;
      sh.w_thread = me1;
      sh.w_group = w->group_serial;
      sh.w_simd_epoch = se;
    } else {
      if (sh.w_group != w->group_serial) {
        snprintf(msg, sizeof msg, "read of threadgroup variable '%s' at byte %zu before any thread "
                 "of the group wrote it", var->name.c_str(), off + i - var->offset);
        add_finding(__KP_F_UNINIT, line, msg, where, pc);
        break;
      }
      if (sh.w_epoch == w->epoch && sh.w_thread != me1 && conflicts(w, me, sh.w_thread, sh.w_simd_epoch))
        kind = "written by thread %u and read by thread %u", other = sh.w_thread - 1;
      if (sh.r_epoch != w->epoch) {
        sh.r_epoch = w->epoch;
        sh.r_thread = me1;
        sh.r_simd_epoch = se;
      } else if (sh.r_thread != me1) {
        sh.r_thread = 0xFFFF;
      }
    }
    if (kind) {
      char who[96];
      if (other == 0xFFFE)  // several readers were recorded
        snprintf(who, sizeof who, "read by several threads and written by thread %u", me);
      else
        snprintf(who, sizeof who, kind, other, me);
      snprintf(msg, sizeof msg, "race on threadgroup variable '%s' byte %zu: %s with no barrier "
               "between", var->name.c_str(), off + i - var->offset, who);
      add_finding(__KP_F_RACE, line, msg, where, pc);
      break;
    }
  }
}

// Set while __kp_check_access checks an atomic it has counted already (counters.cpp).
static thread_local bool t_counted = false;
struct CountPause {
  CountPause() { t_counted = true; }
  ~CountPause() { t_counted = false; }
};

static inline void on_access(void* p, size_t n, bool write, void* pc, unsigned line = 0) {
  Worker* w = t_worker;
  if (!w || !w->running) return;
  uintptr_t a = (uintptr_t)p;
  uintptr_t tg = (uintptr_t)w->tg_arena;
  if (g_launch.count && !t_counted) {  // performance counters (counters.cpp)
    bool shared = a - tg < w->tg_capacity ||
                  (w->dyn_smem && a - (uintptr_t)w->dyn_smem < g_launch.dyn_smem);
    count_access(w, a, n, write, pc, shared ? 1 : 0);
  }
  if (a - tg < w->tg_capacity) return tg_access(w, a - tg, n, write, pc, line);
  if (w->dyn_smem && a - (uintptr_t)w->dyn_smem < g_launch.dyn_smem + 64) {
    if (a + n > (uintptr_t)w->dyn_smem + g_launch.dyn_smem) {
      char msg[160];
      snprintf(msg, sizeof msg, "out-of-bounds %s of dynamic shared memory at byte %zu (%zu bytes "
               "requested at launch)", write ? "write" : "read",
               (size_t)(a - (uintptr_t)w->dyn_smem), g_launch.dyn_smem);
      add_finding(__KP_F_OOB, line, msg, &w->running->pos, pc);
    }
    return;
  }
  Arg* b = buffer_of(a);
  if (b && n) {
    Arg::Extent& e = write ? b->writes : b->reads;
    int64_t start = (int64_t)(a - (uintptr_t)b->data);
    lower_to(&e.lo, start);
    raise_to(&e.hi, start + (int64_t)n);
  }
  if (b && (a < (uintptr_t)b->data || a + n > (uintptr_t)(b->data + b->bytes))) {
    report_buffer_oob(b, a, write, pc, line);
  } else if (b && write && !b->writes_back) {
    // Metal inputs are `const device`: a write means a cast dropped the const. On a GPU it
    // would change the caller's array (and could fool a checker that reads it afterwards).
    char msg[200];
    snprintf(msg, sizeof msg, "write to input buffer '%s' at element %lld: inputs are const; "
             "a kernel must not mutate them", b->name.c_str(),
             ((long long)a - (long long)(uintptr_t)b->data) / (long long)b->elem_size);
    add_finding(__KP_F_INVALID, line, msg, t_worker && t_worker->running ?
                &t_worker->running->pos : nullptr, pc);
  }
}

static inline void check_aligned(void* p, size_t n, void* pc) {
  Worker* w = t_worker;
  if (!w || !w->running || ((uintptr_t)p & (n - 1)) == 0) return;
  uintptr_t a = (uintptr_t)p;
  const Arg* b = buffer_of(a);
  if (!b && a - (uintptr_t)w->tg_arena >= w->tg_capacity) return;  // thread-local data
  char msg[200];
  snprintf(msg, sizeof msg, "misaligned %zu-byte access at address 0x%lx%s%s%s (a GPU faults "
           "with 'misaligned address')", n, (unsigned long)a, b ? " in buffer '" : "",
           b ? b->name.c_str() : "", b ? "'" : "");
  add_finding(__KP_F_INVALID, 0, msg, &w->running->pos, pc);
}

}  // namespace __kp

using __kp::check_aligned;
using __kp::on_access;
#define __KP_PC __builtin_return_address(0)

extern "C" {
// `line`, when nonzero, is the caller's line (atomics of the shims); otherwise the return address
// locates the access.
void __kp_check_access(const void* addr, size_t size, int is_write, unsigned line) {
  __kp::Worker* w = __kp::t_worker;
  if (!__kp::g_launch.checked || !w || !w->running) return;
  uintptr_t a = (uintptr_t)addr, tg = (uintptr_t)w->tg_arena;
  if (__kp::g_launch.count) {  // counted here as an atomic; on_access below must not count it
    bool shared = a - tg < w->tg_capacity ||
                  (w->dyn_smem && a - (uintptr_t)w->dyn_smem < __kp::g_launch.dyn_smem);
    __kp::count_access(w, a, size, is_write, __KP_PC, shared ? 3 : 2);
  }
  __kp::CountPause pause;
  if (a - tg < w->tg_capacity) {
    // Atomics: bounds only; mark the bytes as written so later plain reads are not "uninitialised".
    const __kp::TgVar* before;
    if (!__kp::tg_var_at(w, a - tg, &before))
      return on_access((void*)addr, size, is_write, __KP_PC, line);
    if (is_write)
      for (size_t i = 0; i < size; i++) w->shadow[a - tg + i].w_group = w->group_serial;
    return;
  }
  on_access((void*)addr, size, is_write, __KP_PC, line);
}

void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}
// The aligned hooks are called where the compiler assumed N-byte alignment from the type (a
// float4 load, say): on a GPU a misaligned address there faults, so it is reported.
#define __KP_HOOKS(N)                                                                         \
  void __tsan_read##N(void* p) { check_aligned(p, N, __KP_PC); on_access(p, N, false, __KP_PC); } \
  void __tsan_write##N(void* p) { check_aligned(p, N, __KP_PC); on_access(p, N, true, __KP_PC); } \
  void __tsan_unaligned_read##N(void* p) { on_access(p, N, false, __KP_PC); }               \
  void __tsan_unaligned_write##N(void* p) { on_access(p, N, true, __KP_PC); }               \
  void __tsan_volatile_read##N(void* p) { on_access(p, N, false, __KP_PC); }                \
  void __tsan_volatile_write##N(void* p) { on_access(p, N, true, __KP_PC); }                \
  void __tsan_unaligned_volatile_read##N(void* p) { on_access(p, N, false, __KP_PC); }      \
  void __tsan_unaligned_volatile_write##N(void* p) { on_access(p, N, true, __KP_PC); }
__KP_HOOKS(1)
__KP_HOOKS(2)
__KP_HOOKS(4)
__KP_HOOKS(8)
__KP_HOOKS(16)
void __tsan_read_range(void* p, unsigned long n) { on_access(p, n, false, __KP_PC); }
void __tsan_write_range(void* p, unsigned long n) { on_access(p, n, true, __KP_PC); }
void __tsan_vptr_read(void**) {}
void __tsan_vptr_update(void**, void*) {}
void* __tsan_memcpy(void* d, const void* s, unsigned long n) {
  on_access((void*)s, n, false, __KP_PC);
  on_access(d, n, true, __KP_PC);
  return memcpy(d, s, n);
}
void* __tsan_memmove(void* d, const void* s, unsigned long n) {
  on_access((void*)s, n, false, __KP_PC);
  on_access(d, n, true, __KP_PC);
  return memmove(d, s, n);
}
void* __tsan_memset(void* d, int c, unsigned long n) {
  on_access(d, n, true, __KP_PC);
  return memset(d, c, n);
}
}
