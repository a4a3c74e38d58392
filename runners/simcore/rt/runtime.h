// Internal state of the simulator runtime, shared by host.cpp, scheduler.cpp and checks.cpp.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "../include/kport/rt.h"
#include "fiber.h"
#include "mini.h"

namespace __kp {

// One kernel argument as the request file describes it.
struct Arg {
  Str name;
  bool is_buffer = false;
  bool writes_back = false;  // out/inout: copied back to its file after the run
  bool detached = false;     // a buffer a struct argument's pointer field holds: no kernel arg
  size_t elem_size = 1;
  size_t bytes = 0;
  Str path;                  // buffer contents (in and out)
  int fd = -1;               // out/inout: kept open for the write-back (no opens after lockdown)
  Vec<unsigned char> scalar;  // scalar bytes
  // Pointer fields of a struct scalar: the address of buffer `target` goes at byte `offset`
  struct Pointer { size_t offset; Str target; };
  Vec<Pointer> pointers;
  // Buffer placement: [guard][lo redzone][data][hi redzone][guard]
  unsigned char* map = nullptr;
  size_t map_bytes = 0;
  unsigned char* data = nullptr;
  unsigned char* lo = nullptr;  // start of low redzone
  unsigned char* hi = nullptr;  // end of high redzone
  void* value_slot = nullptr;   // what args[i] points at
  // Checked mode: the lowest start and highest end byte offset, from `data`, of the accesses
  // threads made (redzones included), reads and writes apart; widened atomically (checks.cpp).
  struct Extent { int64_t lo = INT64_MAX, hi = INT64_MIN; };
  Extent reads, writes;
};

// What the scheduler does with a simulated thread next.
enum ThreadState : uint8_t { T_READY, T_AT_SIMD, T_AT_BARRIER, T_DONE };

struct SimThread {
  __kp_thread pos;
  Fiber fiber;
  ThreadState state = T_READY;
  uint32_t site = 0;        // line << 12 | column of the sync it waits at
  uint32_t required = 0;    // CUDA member mask of the collective
  int pred = 0, op = 0;     // barrier reduction input
  int reduced = 0;          // barrier reduction output
  uint64_t mask = 0;        // participants of the last collective
  unsigned char slot[__KP_SLOT_BYTES];
};

// A threadgroup/__shared__ variable placed in the group arena.
struct TgVar {
  const void* site;
  size_t offset, size;
  Str name;
  unsigned line;
};


// Checked mode, per worker: one __kp_view (rt.h) a buffer, holding the extents this worker's
// accesses reached, merged into the Arg after each group (merge_extents), so the access checks
// write no cache line another worker writes.

// One OS thread of the pool: runs whole threadgroups, one at a time.
struct Worker {
  int index = 0;
  Vec<SimThread> threads;
  Vec<Vec<unsigned char>> simd_snap;  // per simd group: 32 slots
  Vec<uint32_t> simd_epoch;
  Fiber main_fiber;
  SimThread* running = nullptr;
  __kp_thread** cur_slot = nullptr;    // the kernel library's __kp_cur of this OS thread
  uint32_t n = 0;                    // threads in the running group
  uint32_t simd_waiting = 0;         // threads blocked at a collective since the last resolve
  unsigned char* tg_arena = nullptr;  // threadgroup memory (+ redzones in checked mode)
  size_t tg_capacity = 0, tg_used = 0, tg_limit = 0;
  size_t tg_first = 0;               // where the first variable goes (a redzone when checked)
  Vec<TgVar> tg_vars;
  unsigned char* dyn_smem = nullptr;
  // Checked mode, race and uninitialised-read state (rt.h): a record a 4-byte word of the
  // arena (tg_capacity / 4 + 4), and a record a byte (tg_capacity) for the words accessed in
  // parts during the group; one mapping, zero until touched (checks.cpp).
  __kp_tg_word* words = nullptr;
  __kp_tg_word* bytes = nullptr;
  size_t words_ready = 0;            // words[0, words_ready) are set up (checks_var_added)
  __kp_tg_check tg_check = {};       // the inline checks' view; its epochs are the group's
  Vec<__kp_view> views;              // checked mode: one per argument (buffers used)
  size_t fast_views = 0;             // views the hot path tries (none when counting)
  __kp_view** last_view = nullptr;   // the kernel's __kp_last_view[4] of this OS thread
  size_t last_var = 0;               // index of the threadgroup variable the last access hit
  uint32_t group_serial = 0;
  char* stacks = nullptr;
  size_t stack_size = 0, stack_stride = 0, stack_count = 0;
  // Work-item loops: per-thread arrays of the running group, bump-allocated from chunks that
  // are reused by the next group (kport/workitems.h).
  struct Chunk { unsigned char* base; size_t size; };
  Vec<Chunk> wi_chunks;
  size_t wi_chunk = 0, wi_used = 0;
};

struct Launch {
  Str kernel_path;
  uint32_t groups[3] = {1, 1, 1};
  uint32_t tg[3] = {1, 1, 1};
  uint32_t grid_threads[3] = {1, 1, 1};
  bool nonuniform = false;     // Metal dispatchThreads: edge groups are clipped to grid_threads
  size_t tg_mem_limit = 32768;
  size_t dyn_smem = 0;
  int os_threads = 1;
  bool checked = false;        // kernel built with access instrumentation
  bool count = false;          // performance counters (counters.cpp); needs `checked`
  // What a checked launch checks (KPORT_SIM_CHECKS): bounds (buffers, threadgroup variables,
  // dynamic shared memory, writes to inputs), races and uninitialised reads of threadgroup memory.
  bool check_bounds = true, check_race = true, check_uninit = true;
  size_t stack_size = 128 * 1024;
  Str result_path, printf_path;
  bool lockdown_required = true;  // fail rather than run the kernel without Landlock + seccomp
  Vec<Arg> args;
  Vec<void*> arg_ptrs;
  // from the kernel library
  void (*entry)(void**) = nullptr;
  void (*run_threads)(void**, __kp_thread*) = nullptr;
  __kp_thread** (*current_slot)(void) = nullptr;
  __kp_view** (*view_slots)(void) = nullptr;
  __kp_tg_check** (*tg_slot)(void) = nullptr;
  int needs_sync = 1;
  Str dialect;
};

extern Launch g_launch;
extern __thread Worker* t_worker;

// host.cpp
void add_finding(int kind, unsigned line, const char* msg, const __kp_thread* where, void* pc);
[[noreturn]] void finish_fatal(int kind, unsigned line, const char* msg, const __kp_thread* where,
                               void* pc);

// scheduler.cpp
void worker_setup(Worker* w);
void run_group(Worker* w, uint32_t gx, uint32_t gy, uint32_t gz);

// checks.cpp
Arg* buffer_of(uintptr_t addr);  // buffer whose guarded span holds addr, or null
void checks_worker_setup(Worker* w);
void merge_extents(Worker* w);   // the worker's extents into the Args'; called after each group
void checks_group_start(Worker* w);  // new epochs: nothing of an earlier group counts
void checks_var_added(Worker* w, const TgVar& v);  // its whole words go to the inline checks

// counters.cpp: performance counters of a launch with `count` set (written as "counters").
enum CounterId {
  C_GLD_INSTR, C_GLD_SECTORS, C_GLD_BYTES, C_GST_INSTR, C_GST_SECTORS, C_GST_BYTES,
  C_SLD_INSTR, C_SLD_WAVES, C_SST_INSTR, C_SST_WAVES, C_GATOM_INSTR, C_GATOM_OPS,
  C_SATOM_INSTR, C_SATOM_OPS, C_ATOM_SAME_ADDR, C_BARRIERS, C_COLLECTIVES, C_GROUPS, C_THREADS,
  C_TG_BYTES, C_LANE_ACCESSES, C_GLD_SEG64, C_GST_SEG64,
  C_GLD_GROUP_SEG64, C_GST_PARTIAL, C_GST_GROUP_SECTORS, C_COUNT
};
void counters_setup();
// space: 0 global, 1 shared, 2 global atomic, 3 shared atomic
void count_access(Worker* w, uintptr_t addr, size_t n, bool write, void* pc, int space);
void count_event(int which);  // C_BARRIERS or C_COLLECTIVES, by the running thread
void counters_worker_done();
void write_counters(Str& out);

}  // namespace __kp
