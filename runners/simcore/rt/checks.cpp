// Full checks. Kernels built in checked mode are compiled with -fsanitize=thread, which makes
// clang call __tsan_* hooks on every memory access; we define those hooks here (TSan's own runtime
// is never linked) to check bounds of buffers and threadgroup variables, threadgroup-memory races
// between two barriers, and reads of threadgroup memory no thread of the group has written.
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

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

// Matches no access: where the last views point before the first hit, and always when counting.
static __kp_view g_no_view = {0, {0, 0}, {0, 0}, {0, 0}};

void checks_worker_setup(Worker* w) {
  w->views.assign(g_launch.args.size(), __kp_view{0, {0, 0}, {INT64_MAX, INT64_MAX},
                                                  {INT64_MIN, INT64_MIN}});
  w->fast_views = g_launch.count ? 0 : w->views.size();  // counters see every access
  for (size_t i = 0; i < g_launch.args.size(); i++) {
    const Arg& a = g_launch.args[i];
    w->views[i].data = (uintptr_t)a.data;
    w->views[i].size[0] = a.bytes, w->views[i].size[1] = a.writes_back ? a.bytes : 0;
  }
  w->last_view = g_launch.view_slots();
  for (int k = 0; k < 4; k++) w->last_view[k] = &g_no_view;
  // The records, zero pages until touched: setting up megabytes of them cost a checked launch
  // 1.5 ms a worker. The inline checks see the words up to the last variable's end
  // (checks_var_added), so the records past it are never read before they are set.
  const size_t words = w->tg_capacity / 4 + 4;
  void* m = mmap(nullptr, (words + w->tg_capacity) * sizeof(__kp_tg_word),
                 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    finish_fatal(__KP_F_LIMIT, 0, "cannot map the threadgroup-memory records", nullptr, nullptr);
  w->words = (__kp_tg_word*)m;
  w->bytes = w->words + words;
  __kp_tg_check& c = w->tg_check;
  c.arena = (uintptr_t)w->tg_arena;
  c.bytes = 0;  // and 0 all along when counting: counters see every access
  c.words = w->words;
  c.simd_epoch = w->simd_epoch.data();
  c.track = g_launch.check_race || g_launch.check_uninit;
  *g_launch.tg_slot() = &c;
}

// The words up to the variable's end (rounded up to 16 bytes) and 4 more (a 16-byte access at
// the last word reads 4 records) start as the runtime's; its whole words go to the inline checks.
void checks_var_added(Worker* w, const TgVar& v) {
  const size_t end = (v.offset + v.size) / 4, seen = (end + 3) / 4 * 4;
  for (; w->words_ready < seen + 4; w->words_ready++) w->words[w->words_ready].slow = UINT32_MAX;
  for (size_t i = v.offset / 4; i < end; i++) w->words[i].slow = 0;
  if (!g_launch.count && seen * 4 > w->tg_check.bytes) w->tg_check.bytes = seen * 4;
}

// A group starts two epochs on: group_epoch, between the two, is no barrier interval's, so
// atomics can mark a word written in the group without a write in any interval. Epochs are
// 32-bit: before they could wrap, every record is cleared and they start again.
void checks_group_start(Worker* w) {
  __kp_tg_check& c = w->tg_check;
  if (c.epoch > 0x80000000u) {
    for (size_t i = 0; i < w->words_ready; i++) {
      __kp_tg_word& r = w->words[i];
      r = __kp_tg_word{0, 0, 0, 0, 0, 0, r.slow == UINT32_MAX ? r.slow : 0};
    }
    memset(w->bytes, 0, w->tg_capacity * sizeof(__kp_tg_word));
    c.epoch = 0;
  }
  c.epoch += 2;
  c.group_epoch = c.epoch - 1;
}

void merge_extents(Worker* w) {
  for (size_t i = 0; i < w->views.size(); i++) {
    __kp_view& v = w->views[i];
    Arg::Extent* e[2] = {&g_launch.args[i].reads, &g_launch.args[i].writes};
    for (int k = 0; k < 2; k++) {
      if (v.lo[k] > v.hi[k]) continue;  // nothing recorded since the last merge
      lower_to(&e[k]->lo, v.lo[k]);
      raise_to(&e[k]->hi, v.hi[k]);
      v.lo[k] = INT64_MAX, v.hi[k] = INT64_MIN;
    }
  }
}

static inline void extend(__kp_view* v, bool write, int64_t start, size_t n) {
  if (start < v->lo[write]) v->lo[write] = start;
  if (start + (int64_t)n > v->hi[write]) v->hi[write] = start + (int64_t)n;
}

static void report_buffer_oob(const Arg* b, uintptr_t a, bool write, void* pc, unsigned line) {
  long long index = ((long long)a - (long long)(uintptr_t)b->data) / (long long)b->elem_size;
  char msg[256];
  snprintf(msg, sizeof msg, "out-of-bounds %s of buffer '%s' at element %lld (valid 0..%zu)",
           write ? "write" : "read", b->name.c_str(), index, b->bytes / b->elem_size - 1);
  const __kp_thread* where = t_worker && t_worker->running ? &t_worker->running->pos : nullptr;
  add_finding(__KP_F_OOB, line, msg, where, pc);
}

static const TgVar* tg_var_at(Worker* w, size_t off, const TgVar** before) {
  *before = nullptr;
  if (w->last_var < w->tg_vars.size()) {
    const TgVar& v = w->tg_vars[w->last_var];
    if (off >= v.offset && off < v.offset + v.size) return &v;
  }
  for (size_t i = 0; i < w->tg_vars.size(); i++) {
    const TgVar& v = w->tg_vars[i];
    if (off >= v.offset && off < v.offset + v.size) {
      w->last_var = i;
      return &v;
    }
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

static __attribute__((noinline)) void report_tg_oob(Worker* w, const TgVar* before, size_t off,
                                                    bool write, void* pc, unsigned line) {
  char msg[320];
  if (before)
    snprintf(msg, sizeof msg, "out-of-bounds %s of threadgroup variable '%s': byte %zu of a "
             "%zu-byte variable", write ? "write" : "read", before->name.c_str(),
             off - before->offset, before->size);
  else
    snprintf(msg, sizeof msg, "out-of-bounds %s before the first threadgroup variable",
             write ? "write" : "read");
  add_finding(__KP_F_OOB, line, msg, &w->running->pos, pc);  // line 0: the pc locates it
}

static __attribute__((noinline)) void report_uninit(Worker* w, const TgVar* var, size_t at,
                                                    void* pc, unsigned line) {
  char msg[320];
  snprintf(msg, sizeof msg, "read of threadgroup variable '%s' at byte %zu before any thread "
           "of the group wrote it", var->name.c_str(), at - var->offset);
  add_finding(__KP_F_UNINIT, line, msg, &w->running->pos, pc);
}

static __attribute__((noinline)) void report_race(Worker* w, const TgVar* var, size_t at,
                                                  const char* kind, unsigned other, uint32_t me,
                                                  void* pc, unsigned line) {
  char who[96], msg[320];
  if (other == 0xFFFE)  // several readers were recorded
    snprintf(who, sizeof who, "read by several threads and written by thread %u", me);
  else
    snprintf(who, sizeof who, kind, other, me);
  snprintf(msg, sizeof msg, "race on threadgroup variable '%s' byte %zu: %s with no barrier "
           "between", var->name.c_str(), at - var->offset, who);
  add_finding(__KP_F_RACE, line, msg, &w->running->pos, pc);
}

// One access to one record (a word's, or a byte's). `what` gets the race's description (a
// format taking the other thread and this one) or "uninitialised"; null when all is well.
struct Verdict {
  const char* what = nullptr;
  unsigned other = 0;
};

static const char kUninit[] = "uninitialised";

static Verdict record_access(Worker* w, __kp_tg_word& sh, bool write, uint32_t me, uint32_t se) {
  const __kp_tg_check& c = w->tg_check;
  const bool race = g_launch.check_race;
  const uint16_t me1 = (uint16_t)(me + 1);
  Verdict v;
  if (write) {
    if (!race) {
    } else if (sh.w_epoch == c.epoch && sh.w_thread != me1 && conflicts(w, me, sh.w_thread, sh.w_simd))
      v = {"written by thread %u and thread %u", sh.w_thread - 1u};
    else if (sh.r_epoch == c.epoch && sh.r_thread != me1 && conflicts(w, me, sh.r_thread, sh.r_simd))
      v = {"read by thread %u and written by thread %u", sh.r_thread - 1u};
    sh.w_epoch = c.epoch, sh.w_thread = me1, sh.w_simd = se, sh.shared = 0;
    return v;
  }
  if (g_launch.check_uninit && sh.w_epoch < c.group_epoch) return {kUninit, 0};
  if (!race) return v;
  if (sh.w_epoch == c.epoch && sh.w_thread != me1 && conflicts(w, me, sh.w_thread, sh.w_simd))
    v = {"written by thread %u and read by thread %u", sh.w_thread - 1u};
  const bool other = sh.r_epoch == c.epoch && sh.r_thread != me1;
  sh.r_epoch = c.epoch, sh.r_thread = other ? 0xFFFF : me1, sh.r_simd = se;
  return v;
}

// Word i is about to be accessed in parts: from now until the group ends its bytes keep their
// own records, which start as copies of the word's.
static __kp_tg_word* bytes_of(Worker* w, size_t i) {
  __kp_tg_word& word = w->words[i];
  __kp_tg_word* b = &w->bytes[i * 4];
  if (word.slow < w->tg_check.group_epoch) {
    for (int k = 0; k < 4; k++) b[k] = word;
    word.slow = w->tg_check.epoch, word.shared = 0;  // inline reads no longer settle it
  }
  return b;
}

// Threadgroup memory at arena offset `off`: bounds against the variables, then race and
// uninitialised-read checks a word at a time, or a byte at a time where the access covers part
// of a word or the word was accessed in parts in this group. One report an access.
static void tg_access(Worker* w, size_t off, size_t n, bool write, void* pc, unsigned line) {
  const TgVar* before;
  const TgVar* var = tg_var_at(w, off, &before);
  if (!var || off + n > var->offset + var->size) {
    if (g_launch.check_bounds)
      report_tg_oob(w, var ? var : before, var ? var->offset + var->size : off, write, pc, line);
    return;
  }
  if (!g_launch.check_race && !g_launch.check_uninit) return;
  const uint32_t me = w->running->pos.linear, se = w->simd_epoch[me / __KP_SIMD_WIDTH];
  for (size_t at = off, end = off + n; at < end;) {
    const size_t i = at / 4, stop = end < i * 4 + 4 ? end : i * 4 + 4;
    Verdict v;
    if (at == i * 4 && stop == at + 4 && w->words[i].slow < w->tg_check.group_epoch) {
      v = record_access(w, w->words[i], write, me, se);
    } else {
      __kp_tg_word* b = bytes_of(w, i);
      for (; at < stop; at++)
        if ((v = record_access(w, b[at - i * 4], write, me, se)).what) break;
    }
    if (v.what == kUninit) return report_uninit(w, var, at, pc, line);
    if (v.what) return report_race(w, var, at, v.what, v.other, me, pc, line);
    at = stop;
  }
}

// An atomic write: its bytes count as written in the group (no later read of them is
// uninitialised) but not as a write of the interval (atomics do not race with each other).
static void tg_atomic_write(Worker* w, size_t off, size_t n) {
  const uint32_t first = w->tg_check.group_epoch;
  for (size_t at = off, end = off + n; at < end;) {
    const size_t i = at / 4, stop = end < i * 4 + 4 ? end : i * 4 + 4;
    if (at == i * 4 && stop == at + 4 && w->words[i].slow < first) {
      if (w->words[i].w_epoch < first) w->words[i].w_epoch = first;
    } else {
      __kp_tg_word* b = bytes_of(w, i);
      for (; at < stop; at++)
        if (b[at - i * 4].w_epoch < first) b[at - i * 4].w_epoch = first;
    }
    at = stop;
  }
}

// Set while __kp_check_access checks an atomic it has counted already (counters.cpp).
static thread_local bool t_counted = false;
struct CountPause {
  CountPause() { t_counted = true; }
  ~CountPause() { t_counted = false; }
};

// Threadgroup and dynamic shared memory, accesses not wholly inside a buffer (or writes to an
// input), and every access of a launch with performance counters.
static __attribute__((noinline)) void access_slow(Worker* w, uintptr_t a, size_t n, bool write,
                                                  void* pc, unsigned line) {
  uintptr_t tg = (uintptr_t)w->tg_arena;
  if (g_launch.count && !t_counted) {  // performance counters (counters.cpp)
    bool shared = a - tg < w->tg_capacity ||
                  (w->dyn_smem && a - (uintptr_t)w->dyn_smem < g_launch.dyn_smem);
    count_access(w, a, n, write, pc, shared ? 1 : 0);
  }
  if (a - tg < w->tg_capacity) return tg_access(w, a - tg, n, write, pc, line);
  if (w->dyn_smem && a - (uintptr_t)w->dyn_smem < g_launch.dyn_smem + 64) {
    if (g_launch.check_bounds && a + n > (uintptr_t)w->dyn_smem + g_launch.dyn_smem) {
      char msg[160];
      snprintf(msg, sizeof msg, "out-of-bounds %s of dynamic shared memory at byte %zu (%zu bytes "
               "requested at launch)", write ? "write" : "read",
               (size_t)(a - (uintptr_t)w->dyn_smem), g_launch.dyn_smem);
      add_finding(__KP_F_OOB, line, msg, &w->running->pos, pc);
    }
    return;
  }
  Arg* b = buffer_of(a);
  if (!b) return;
  __kp_view* v = &w->views[b - g_launch.args.data()];
  if (n) extend(v, write, (int64_t)(a - (uintptr_t)b->data), n);
  if (a < (uintptr_t)b->data || a + n > (uintptr_t)(b->data + b->bytes)) {
    if (g_launch.check_bounds) report_buffer_oob(b, a, write, pc, line);
  } else if (write && !b->writes_back) {
    if (!g_launch.check_bounds) return;
    // Metal inputs are `const device`: a write means a cast dropped the const. On a GPU it
    // would change the caller's array (and could fool a checker that reads it afterwards).
    char msg[200];
    snprintf(msg, sizeof msg, "write to input buffer '%s' at element %lld: inputs are const; "
             "a kernel must not mutate them", b->name.c_str(),
             ((long long)a - (long long)(uintptr_t)b->data) / (long long)b->elem_size);
    add_finding(__KP_F_INVALID, line, msg, &w->running->pos, pc);
  }
}

static inline bool in_view(const __kp_view* v, uintptr_t a, size_t n, bool write) {
  uintptr_t off = a - v->data, size = v->size[write];
  return off < size && n - 1 < size - off;
}

// The hot path: an in-bounds access (n > 0) to a buffer (the one the last read or write hit
// first) only widens this worker's extents.
static inline void on_access(void* p, size_t n, bool write, void* pc, unsigned line = 0) {
  Worker* w = t_worker;
  if (__builtin_expect(!w || !w->running, 0)) return;
  uintptr_t a = (uintptr_t)p;
  __kp_view* v = w->last_view[write];
  if (__builtin_expect(in_view(v, a, n, write), 1)) {
    extend(v, write, (int64_t)(a - v->data), n);
    return;
  }
  if (a - (uintptr_t)w->tg_arena < w->tg_capacity && !g_launch.count)
    return tg_access(w, a - (uintptr_t)w->tg_arena, n, write, pc, line);
  for (__kp_view *u = w->views.data(), *end = u + w->fast_views; u < end; u++) {
    if (in_view(u, a, n, write)) {
      w->last_view[2 + write] = w->last_view[write];  // the inline check tries both
      w->last_view[write] = u;
      extend(u, write, (int64_t)(a - u->data), n);
      return;
    }
  }
  access_slow(w, a, n, write, pc, line);
}

static __attribute__((noinline)) void check_aligned(void* p, size_t n, void* pc) {
  Worker* w = t_worker;
  if (!w || !w->running) return;
  uintptr_t a = (uintptr_t)p;
  const Arg* b = buffer_of(a);
  if (!b && a - (uintptr_t)w->tg_arena >= w->tg_capacity) return;  // thread-local data
  char msg[200];
  snprintf(msg, sizeof msg, "misaligned %zu-byte access at address 0x%lx%s%s%s (a GPU faults "
           "with 'misaligned address')", n, (unsigned long)a, b ? " in buffer '" : "",
           b ? b->name.c_str() : "", b ? "'" : "");
  add_finding(__KP_F_INVALID, 0, msg, &w->running->pos, pc);
}

// An access where the compiler assumed n-byte alignment from the type.
static inline void on_aligned(void* p, size_t n, bool write, void* pc) {
  if (__builtin_expect(((uintptr_t)p & (n - 1)) != 0, 0)) check_aligned(p, n, pc);
  on_access(p, n, write, pc);
}

}  // namespace __kp

using __kp::on_access;
using __kp::on_aligned;
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
    const __kp::TgVar* var = __kp::tg_var_at(w, a - tg, &before);
    if (!var || a - tg + size > var->offset + var->size)
      return on_access((void*)addr, size, is_write, __KP_PC, line);
    if (is_write) __kp::tg_atomic_write(w, a - tg, size);
    return;
  }
  on_access((void*)addr, size, is_write, __KP_PC, line);
}

void __kp_access(const void* addr, size_t size, int is_write, int aligned, void* pc) {
  __kp::Worker* w = __kp::t_worker;
  uintptr_t tg_off = (uintptr_t)addr - (uintptr_t)(w ? w->tg_arena : nullptr);
  if (w && w->running && tg_off < w->tg_capacity && !__kp::g_launch.count &&
      (!aligned || ((uintptr_t)addr & (size - 1)) == 0))  // threadgroup memory: straight there
    return __kp::tg_access(w, tg_off, size, is_write, pc, 0);
  if (aligned) on_aligned((void*)addr, size, is_write, pc);
  else on_access((void*)addr, size, is_write, pc);
}

void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}
// The aligned hooks are called where the compiler assumed N-byte alignment from the type (a
// float4 load, say): on a GPU a misaligned address there faults, so it is reported.
#define __KP_HOOKS(N)                                                                         \
  void __tsan_read##N(void* p) { on_aligned(p, N, false, __KP_PC); }                         \
  void __tsan_write##N(void* p) { on_aligned(p, N, true, __KP_PC); }                         \
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
