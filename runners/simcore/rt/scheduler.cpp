// Runs one threadgroup on one OS thread: its threads are fibers; barriers and SIMD-group
// collectives are rendezvous points resolved when every fiber of the group has blocked or ended.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"

namespace __kp {

static const size_t kTgRedzone = 64;  // checked mode: gap after each threadgroup variable
static const size_t kStackGuard = 1 << 20;  // a frame jumping further still faults in the gap
static const size_t kStagger = 64 * 64 + 16 * 4096;  // largest offset of a stack top (below)

static size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

static uint32_t group_threads() { return g_launch.tg[0] * g_launch.tg[1] * g_launch.tg[2]; }

void worker_setup(Worker* w) {
  uint32_t n = group_threads();
  w->threads.resize(n);
  uint32_t nsimd = (n + __KP_SIMD_WIDTH - 1) / __KP_SIMD_WIDTH;
  Vec<unsigned char> slots;
  slots.resize(__KP_SIMD_WIDTH * __KP_SLOT_BYTES);
  w->simd_snap.assign(nsimd, slots);
  w->simd_epoch.assign(nsimd, 0);
  // Arena: room for the limit, plus redzones between variables when checked, and one before
  // the first (an access just before it is then reported, not made outside the arena).
  w->tg_limit = g_launch.tg_mem_limit;
  w->tg_capacity = g_launch.tg_mem_limit * (g_launch.checked ? 2 : 1) + 64 * kTgRedzone;
  w->tg_arena = (unsigned char*)aligned_alloc(64, (w->tg_capacity + 63) / 64 * 64);
  w->tg_first = w->tg_used = g_launch.checked ? kTgRedzone : 0;
  if (g_launch.dyn_smem)
    w->dyn_smem = (unsigned char*)aligned_alloc(64, (g_launch.dyn_smem + kTgRedzone + 63) / 64 * 64);
  if (g_launch.checked) {
    checks_worker_setup(w);
  }
  if (!g_launch.needs_sync) return;
  size_t ps = page_size();
  w->stack_size = (g_launch.stack_size + kStagger + ps - 1) / ps * ps;
  w->stack_stride = w->stack_size + kStackGuard;  // inaccessible gap below each stack
  w->stack_count = n;
  w->stacks = (char*)mmap(nullptr, w->stack_stride * n, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (w->stacks == MAP_FAILED) finish_fatal(__KP_F_LIMIT, 0, "cannot map fiber stacks", nullptr, nullptr);
  for (uint32_t i = 0; i < n; i++) {
    char* base = w->stacks + i * w->stack_stride;
    mprotect(base, kStackGuard, PROT_NONE);
    w->threads[i].fiber.stack_lo = base + kStackGuard;
    // Stack tops 1 MiB apart would all fall in one cache set: every switch would evict the
    // previous fiber's frames. Staggering the tops spreads them over the L1 and L2 sets.
    w->threads[i].fiber.stack_size = w->stack_size - (i % 64) * 64 - ((i / 64) % 16) * 4096;
  }
}

static void set_running(Worker* w, SimThread* t) {
  w->running = t;
  *w->cur_slot = &t->pos;
}

// The running thread `t` blocked or ended: switch straight to the next ready thread of this
// round (index order, so runs are deterministic), or back to the scheduler when none is left.
static void yield_from(Worker* w, SimThread* t) {
  for (uint32_t i = t->pos.linear + 1; i < w->n; i++) {
    SimThread* next = &w->threads[i];
    if (next->state == T_READY) {
      set_running(w, next);
      fiber_switch(&t->fiber, &next->fiber);
      return;
    }
  }
  w->running = nullptr;
  fiber_switch(&t->fiber, &w->main_fiber);
}

static void fiber_main(void* p) {
  SimThread* t = (SimThread*)p;
  g_launch.entry(g_launch.arg_ptrs.data());
  t->state = T_DONE;
  yield_from(t_worker, t);
  __builtin_unreachable();
}

static void report_at(int kind, unsigned line, const __kp_thread* where, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void report_at(int kind, unsigned line, const __kp_thread* where, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  add_finding(kind, line, msg, where, nullptr);
}

// Resolve one waiting collective per SIMD group whose lanes have all blocked or ended. Lanes
// waiting at the same site form the active set (Metal semantics); a CUDA member mask names
// lanes that must be there. When lanes of one SIMD group wait at different sites, the site
// earliest in the source goes first: in structured code the others are reconvergence points
// that the first site's lanes will reach too. A site whose required lanes wait elsewhere is
// deferred; only when nothing else can run is it resolved and reported as divergence.
static bool resolve_simd(Worker* w, uint32_t n) {
  if (!w->simd_waiting) return false;
  bool progressed = false;
  uint32_t still_waiting = 0;
  for (uint32_t base = 0, s = 0; base < n; base += __KP_SIMD_WIDTH, s++) {
    uint32_t end = base + __KP_SIMD_WIDTH < n ? base + __KP_SIMD_WIDTH : n;
    uint64_t waiting = 0, existing = (end - base == 64) ? ~0ull : ((1ull << (end - base)) - 1);
    for (uint32_t i = base; i < end; i++)
      if (w->threads[i].state == T_AT_SIMD) waiting |= 1ull << (i - base);
    if (!waiting) continue;
    SimThread* pick = nullptr;
    bool divergent = false;
    uint32_t tried = 0;  // sites considered, lowest first
    for (;;) {
      SimThread* best = nullptr;
      for (uint64_t m = waiting; m; m &= m - 1) {
        SimThread* t = &w->threads[base + __builtin_ctzll(m)];
        if (t->site > tried && (!best || t->site < best->site)) best = t;
      }
      if (!best) break;
      tried = best->site;
      uint64_t here = 0;
      for (uint64_t m = waiting; m; m &= m - 1) {
        uint32_t lane = __builtin_ctzll(m);
        if (w->threads[base + lane].site == best->site) here |= 1ull << lane;
      }
      uint64_t missing = best->required & existing & ~here;
      if (!(missing & waiting)) {  // nobody it needs is held up at another collective
        pick = best;
        divergent = missing != 0;
        break;
      }
    }
    if (!pick) {  // every site waits for lanes held at another: resolve the earliest anyway
      for (uint64_t m = waiting; m; m &= m - 1) {
        SimThread* t = &w->threads[base + __builtin_ctzll(m)];
        if (!pick || t->site < pick->site) pick = t;
      }
      divergent = true;
    }
    uint64_t mask = 0;
    for (uint64_t m = waiting; m; m &= m - 1) {
      uint32_t lane = __builtin_ctzll(m);
      if (w->threads[base + lane].site == pick->site) mask |= 1ull << lane;
    }
    if (divergent) {
      report_at(__KP_F_DIVERGENCE, pick->site >> 12, &pick->pos,
                "warp collective with member mask 0x%08x reached by lanes 0x%08llx only; "
                "lanes 0x%08llx of the mask exited or are elsewhere", pick->required,
                (unsigned long long)mask,
                (unsigned long long)(pick->required & existing & ~mask));
    }
    unsigned char* snap = w->simd_snap[s].data();
    for (uint64_t m = mask; m; m &= m - 1) {
      uint32_t lane = __builtin_ctzll(m);
      SimThread* t = &w->threads[base + lane];
      memcpy(snap + lane * __KP_SLOT_BYTES, t->slot, __KP_SLOT_BYTES);
      t->mask = mask;
      t->state = T_READY;
    }
    still_waiting += __builtin_popcountll(waiting & ~mask);
    w->simd_epoch[s]++;
    progressed = true;
  }
  w->simd_waiting = still_waiting;
  return progressed;
}

// Every live thread waits at a barrier: release them all, reporting any divergence.
static void resolve_barrier(Worker* w, uint32_t n) {
  uint32_t live = 0, done = 0, count = 0, site = 0, other_site = 0, at_site = 0;
  const __kp_thread* first = nullptr;
  int op = 0;
  for (uint32_t i = 0; i < n; i++) {
    SimThread* t = &w->threads[i];
    if (t->state == T_DONE) { done++; continue; }
    live++;
    if (!first) { first = &t->pos; site = t->site; op = t->op; }
    if (t->site == site) at_site++;
    else if (!other_site) other_site = t->site;
    count += t->pred != 0;
  }
  if (other_site) {
    report_at(__KP_F_DIVERGENCE, site >> 12, first,
              "threads of one group wait at different barriers (line %u and line %u); "
              "every thread must reach the same barrier",
              site >> 12, other_site >> 12);
  } else if (done) {
    report_at(__KP_F_DIVERGENCE, site >> 12, first,
              "barrier reached by %u of %u threads of the group; %u threads had already "
              "returned (on a GPU this is undefined behaviour)", at_site, n, done);
  }
  int reduced = op == 1 ? (int)count : op == 2 ? count == live : op == 3 ? count > 0 : 0;
  for (uint32_t i = 0; i < n; i++) {
    SimThread* t = &w->threads[i];
    if (t->state != T_AT_BARRIER) continue;
    t->reduced = reduced;
    t->state = T_READY;
  }
  w->tg_check.epoch++;
}

void run_group(Worker* w, uint32_t gx, uint32_t gy, uint32_t gz) {
  const Launch& L = g_launch;
  uint32_t g[3] = {gx, gy, gz}, size[3];
  for (int d = 0; d < 3; d++) {
    size[d] = L.tg[d];
    if (L.nonuniform && g[d] * L.tg[d] + L.tg[d] > L.grid_threads[d])
      size[d] = L.grid_threads[d] - g[d] * L.tg[d];
  }
  uint32_t n = size[0] * size[1] * size[2];
  uint32_t nsimd = (n + __KP_SIMD_WIDTH - 1) / __KP_SIMD_WIDTH;
  w->n = n;
  // Threadgroup memory is uninitialised on a GPU: poison it so reads of unwritten data show.
  memset(w->tg_arena, 0xFF, w->tg_used);
  if (w->dyn_smem) memset(w->dyn_smem, 0xFF, L.dyn_smem);
  w->group_serial++;
  if (L.checked) checks_group_start(w);
  if (!L.needs_sync) {  // fast path: the library loops over the threads itself
    w->wi_chunk = 0, w->wi_used = 0;  // work-item loops' per-thread arrays start afresh
    __kp_thread* t = &w->threads[0].pos;
    for (int d = 0; d < 3; d++) {
      t->gid[d] = g[d], t->tg_size[d] = size[d], t->tg_dispatch[d] = L.tg[d];
      t->grid[d] = L.grid_threads[d], t->ngroups[d] = L.groups[d];
    }
    t->nsimd = nsimd;
    w->running = &w->threads[0];
    L.run_threads(g_launch.arg_ptrs.data(), t);
    w->running = nullptr;
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    SimThread* t = &w->threads[i];
    __kp_thread* p = &t->pos;
    p->tid[0] = i % size[0];
    p->tid[1] = (i / size[0]) % size[1];
    p->tid[2] = i / (size[0] * size[1]);
    for (int d = 0; d < 3; d++) {
      p->gid[d] = g[d];
      p->tg_size[d] = size[d];
      p->tg_dispatch[d] = L.tg[d];
      p->grid[d] = L.grid_threads[d];
      p->ngroups[d] = L.groups[d];
    }
    p->linear = i;
    p->lane = i % __KP_SIMD_WIDTH;
    p->simd = i / __KP_SIMD_WIDTH;
    p->nsimd = nsimd;
    p->simd_lanes = (p->simd + 1) * __KP_SIMD_WIDTH <= n ? __KP_SIMD_WIDTH : n % __KP_SIMD_WIDTH;
    t->state = T_READY;
  }
  for (uint32_t i = 0; i < n; i++) fiber_init(&w->threads[i].fiber, fiber_main, &w->threads[i]);
  for (;;) {
    // One round: the first ready thread runs, and each hands over to the next ready one.
    for (uint32_t i = 0; i < n; i++) {
      SimThread* t = &w->threads[i];
      if (t->state != T_READY) continue;
      set_running(w, t);
      fiber_switch(&w->main_fiber, &t->fiber);
      break;
    }
    w->running = nullptr;
    if (resolve_simd(w, n)) continue;
    bool any_live = false;
    for (uint32_t i = 0; i < n && !any_live; i++) any_live = w->threads[i].state != T_DONE;
    if (!any_live) break;
    resolve_barrier(w, n);
  }
}

}  // namespace __kp

using namespace __kp;

// Out of line and cold: every fiber keeps a __kp_barrier frame alive while it waits, and a small
// frame keeps 1024 waiting fibers' stacks in cache.
[[noreturn]] __attribute__((noinline, cold)) static void sync_misuse(const char* what,
                                                                    unsigned line) {
  Worker* w = t_worker;
  if (!w || !w->running) finish_fatal(__KP_F_UNSUPPORTED, line, what, nullptr, nullptr);
  char msg[256];
  snprintf(msg, sizeof msg, "%s called, but the kernel was built without fiber support "
           "(internal: its sync scan missed this call)", what);
  finish_fatal(__KP_F_UNSUPPORTED, line, msg, &w->running->pos, nullptr);
}

static inline SimThread* current_or_die(const char* what, unsigned line) {
  Worker* w = t_worker;
  if (__builtin_expect(!w || !w->running || !g_launch.needs_sync, 0)) sync_misuse(what, line);
  return w->running;
}

extern "C" uint64_t __kp_simd_sync(const void* value, unsigned size, unsigned line, unsigned column,
                                 uint32_t required, const unsigned char** snapshot) {
  SimThread* t = current_or_die("a SIMD-group collective", line);
  Worker* w = t_worker;
  if (__builtin_expect(size > __KP_SLOT_BYTES, 0)) sync_misuse("an oversized collective", line);
  if (g_launch.count) count_event(C_COLLECTIVES);  // performance counters (counters.cpp)
  if (size) memcpy(t->slot, value, size);
  t->state = T_AT_SIMD;
  t->site = line << 12 | (column & 0xFFF);
  t->required = required;
  w->simd_waiting++;
  yield_from(w, t);
  *snapshot = w->simd_snap[t->pos.simd].data();
  return t->mask;
}

extern "C" int __kp_barrier(unsigned line, unsigned column, int pred, int op) {
  SimThread* t = current_or_die("a threadgroup barrier", line);
  if (g_launch.count) count_event(C_BARRIERS);  // performance counters (counters.cpp)
  t->state = T_AT_BARRIER;
  t->site = line << 12 | (column & 0xFFF);
  t->pred = pred;
  t->op = op;
  yield_from(t_worker, t);
  return t->reduced;
}

extern "C" void* __kp_tg_alloc(const void* site, size_t size, size_t align, const char* name,
                             unsigned line) {
  Worker* w = t_worker;
  for (const TgVar& v : w->tg_vars)
    if (v.site == site) return w->tg_arena + v.offset;
  size_t accounted = size;
  for (const TgVar& v : w->tg_vars) accounted += v.size;
  if (accounted > w->tg_limit) {
    char msg[256];
    snprintf(msg, sizeof msg, "threadgroup memory: '%s' (%zu bytes) brings the group's total to "
             "%zu bytes, over the limit of %zu bytes", name, size, accounted, w->tg_limit);
    finish_fatal(__KP_F_LIMIT, line, msg, w->running ? &w->running->pos : nullptr, nullptr);
  }
  if (align < 16) align = 16;
  size_t offset = (w->tg_used + align - 1) / align * align;
  if (offset + size + kTgRedzone > w->tg_capacity)
    finish_fatal(__KP_F_LIMIT, line, "threadgroup memory: too many variables for the arena",
                 w->running ? &w->running->pos : nullptr, nullptr);
  w->tg_used = offset + size + (g_launch.checked ? kTgRedzone : 0);
  w->tg_vars.push_back(TgVar{site, offset, size, name, line});
  if (g_launch.checked) checks_var_added(w, w->tg_vars.back());
  memset(w->tg_arena + offset, 0xFF, w->tg_used - offset);
  return w->tg_arena + offset;
}

// Work-item loops (kport/workitems.h). Allocations of one group come from the worker's
// chunks in order; a request larger than what is left of a chunk moves to the next chunk.
extern "C" void* __kp_wi_alloc(size_t size, size_t align, uint32_t n) {
  Worker* w = t_worker;
  if (size > g_launch.stack_size) {  // what overflows a fiber's stack is refused here too
    char msg[200];
    snprintf(msg, sizeof msg, "stack overflow of a simulated thread (%zu-byte stacks): a "
             "%zu-byte local lives across a barrier; large thread-local arrays",
             g_launch.stack_size, size);
    finish_fatal(__KP_F_LIMIT, 0, msg, w->running ? &w->running->pos : nullptr, nullptr);
  }
  size_t bytes = size * (n ? n : 1);
  if (align < 16) align = 16;
  for (;;) {
    if (w->wi_chunk == w->wi_chunks.size()) {
      size_t cap = bytes + align > ((size_t)1 << 20) ? bytes + align : (size_t)1 << 20;
      unsigned char* p = (unsigned char*)malloc(cap);
      if (!p) finish_fatal(__KP_F_LIMIT, 0, "cannot allocate per-thread arrays", nullptr, nullptr);
      w->wi_chunks.push_back({p, cap});
      w->wi_used = 0;
    }
    const Worker::Chunk& c = w->wi_chunks[w->wi_chunk];
    size_t at = ((uintptr_t)c.base + w->wi_used + align - 1) / align * align - (uintptr_t)c.base;
    if (at + bytes <= c.size) {
      w->wi_used = at + bytes;
      return c.base + at;
    }
    w->wi_chunk++, w->wi_used = 0;
  }
}

extern "C" unsigned char* __kp_wi_flags(uint32_t n) {
  unsigned char* p = (unsigned char*)__kp_wi_alloc(1, 1, n);
  memset(p, 0, n);
  return p;
}

extern "C" void __kp_wi_barrier(unsigned line, unsigned column, uint32_t live, uint32_t done) {
  (void)column;
  Worker* w = t_worker;
  if (live && done)
    report_at(__KP_F_DIVERGENCE, line, &w->running->pos,
              "barrier reached by %u of %u threads of the group; %u threads had already "
              "returned (on a GPU this is undefined behaviour)", live, live + done, done);
  if (g_launch.count)
    for (uint32_t i = 0; i < live; i++) count_event(C_BARRIERS);
  w->tg_check.epoch++;
}

extern "C" void* __kp_dyn_smem(void) { return t_worker->dyn_smem; }
extern "C" size_t __kp_dyn_smem_size(void) { return g_launch.dyn_smem; }
