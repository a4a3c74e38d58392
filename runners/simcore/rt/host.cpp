// kport-simhost: runs one kernel launch described by a request file, in a child process the
// Python parent started with limits. It maps the buffers between guard pages, runs threadgroups
// over a pool of OS threads and writes a JSON result; the parent judges.
//
// Request file (one item per line; written by runners/simhost.py):
//   kernel PATH | groups X Y Z | tg X Y Z | grid X Y Z | nonuniform 0|1 | tg_mem BYTES
//   dyn_smem BYTES | threads N | checked 0|1 | count 0|1 | checks MASK (1 bounds, 2 race,
//   4 uninit; all when absent) | stack BYTES | result PATH | printf PATH
//   lockdown required|optional
//   buffer NAME ELEM_SIZE BYTES in|out|inout PATH [detached]      scalar NAME HEXBYTES
//   pointer SCALAR OFFSET BUFFER  (a struct scalar's pointer field: the address of a detached
//   buffer, which is no kernel argument of its own, is written at that byte offset)
// Every file is opened before the lockdown (lockdown.cpp); the kernel library is loaded after it.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "lockdown.h"
#include "runtime.h"

namespace __kp {

Launch g_launch;
__thread Worker* t_worker = nullptr;

struct Finding {
  int kind;
  unsigned line;
  Str message;
  __kp_thread where;
  bool has_where;
  uintptr_t pc_offset;  // in the kernel library, 0 when unknown
  unsigned count;
};

static Mutex g_mutex;
static Vec<Finding> g_findings;
static Str g_printf;
static const size_t kMaxFindings = 200, kMaxPrintf = 1 << 20;
static bool g_printf_truncated = false;
static uintptr_t g_lib_base = 0;
static int g_finishing = 0;  // set by the first thread that finishes with a fault
static double g_t0, g_kernel_s = 0;

static const char* kind_name(int kind) {
  switch (kind) {
    case __KP_F_DIVERGENCE: return "divergence";
    case __KP_F_OOB: return "out_of_bounds";
    case __KP_F_RACE: return "race";
    case __KP_F_INVALID: return "invalid";
    case __KP_F_UNSUPPORTED: return "unsupported";
    case __KP_F_LIMIT: return "limit";
    case __KP_F_UNINIT: return "uninitialized";
    case __KP_F_SANDBOX: return "sandbox";
    default: return "crash";
  }
}

static uintptr_t pc_offset(void* pc) {
  uintptr_t p = (uintptr_t)pc;
  return pc && g_lib_base && p > g_lib_base ? p - g_lib_base : 0;
}

// Where a finding happened. Without fibers the group's one record is the running thread's,
// and work-item loops store only its index there (kport/workitems.h): the rest follows.
static __kp_thread located(const __kp_thread* where) {
  __kp_thread p = *where;
  if (g_launch.needs_sync || !p.tg_size[0] || !p.tg_size[1]) return p;
  const uint32_t i = p.linear, nx = p.tg_size[0], ny = p.tg_size[1];
  const uint32_t n = nx * ny * p.tg_size[2], full = n / __KP_SIMD_WIDTH * __KP_SIMD_WIDTH;
  p.tid[0] = i % nx, p.tid[1] = i / nx % ny, p.tid[2] = i / (nx * ny);
  p.lane = i % __KP_SIMD_WIDTH, p.simd = i / __KP_SIMD_WIDTH;
  p.simd_lanes = i < full ? __KP_SIMD_WIDTH : n - full;
  return p;
}

void add_finding(int kind, unsigned line, const char* msg, const __kp_thread* where, void* pc) {
  Lock lock(g_mutex);
  uintptr_t off = pc_offset(pc);
  for (Finding& f : g_findings)
    if (f.kind == kind && f.line == line && f.pc_offset == off &&
        (off || line || f.message == msg)) {
      f.count++;
      return;
    }
  if (g_findings.size() >= kMaxFindings) return;
  Finding f{kind, line, msg, {}, where != nullptr, off, 1};
  if (where) f.where = located(where);
  g_findings.push_back(f);
}

static void json_string(Str& out, const Str& s) {
  out += '"';
  char esc[8];
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += (char)c;
    else if (c < 0x20 || c >= 0x7F) snprintf(esc, sizeof esc, "\\u%04x", c), out += esc;
    else out += (char)c;
  }
  out += '"';
}

static void write_finding(Str& out, const Finding& f) {
  char buf[256];
  snprintf(buf, sizeof buf, "{\"kind\": \"%s\", \"line\": %u, \"count\": %u, \"pc_offset\": %lu, "
           "\"message\": ", kind_name(f.kind), f.line, f.count, (unsigned long)f.pc_offset);
  out += buf;
  json_string(out, f.message);
  if (f.has_where) {
    snprintf(buf, sizeof buf, ", \"thread\": [%u, %u, %u], \"group\": [%u, %u, %u]",
             f.where.tid[0], f.where.tid[1], f.where.tid[2], f.where.gid[0], f.where.gid[1],
             f.where.gid[2]);
    out += buf;
  }
  out += '}';
}

// One side of a buffer's extent in elements, [lo, hi) with hi rounded up, or null when no
// thread made such an access. Offsets below the data (the low redzone) round down.
static void write_extent(Str& out, const Arg::Extent& e, size_t elem_size) {
  int64_t lo = __atomic_load_n(&e.lo, __ATOMIC_RELAXED);
  int64_t hi = __atomic_load_n(&e.hi, __ATOMIC_RELAXED);
  if (lo > hi) {
    out += "null";
    return;
  }
  int64_t size = (int64_t)elem_size;
  int64_t first = lo >= 0 ? lo / size : -((-lo + size - 1) / size);
  int64_t end = hi >= 0 ? (hi + size - 1) / size : -(-hi / size);
  char buf[64];
  snprintf(buf, sizeof buf, "[%lld, %lld]", (long long)first, (long long)end);
  out += buf;
}

// Checked mode: how far each buffer was read and written (kport fits shapes from these).
static void write_extents(Str& out) {
  out += ",\n \"extents\": {";
  const char* sep = "";
  for (const Arg& a : g_launch.args) {
    if (!a.is_buffer) continue;
    out += sep;
    json_string(out, a.name);
    out += ": {\"read\": ";
    write_extent(out, a.reads, a.elem_size);
    out += ", \"write\": ";
    write_extent(out, a.writes, a.elem_size);
    out += '}';
    sep = ", ";
  }
  out += '}';
}

static double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int g_result_fd = -1, g_printf_fd = -1;
static Str g_lockdown = "none";
static double g_lockdown_s = 0;  // time spent installing Landlock and seccomp

static bool write_all(int fd, const void* data, size_t size, off_t at = -1) {
  const char* p = (const char*)data;
  while (size) {
    ssize_t n = at < 0 ? write(fd, p, size) : pwrite(fd, p, size, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n, size -= (size_t)n;
    if (at >= 0) at += n;
  }
  return true;
}

// The result file is the only verdict channel; the parent never trusts the child's stdout.
// Both files were opened before the lockdown: nothing here opens a path.
static void write_result(const char* status, const Finding* fatal) {
  Str out;
  char head[256];
  snprintf(head, sizeof head, "{\"status\": \"%s\", \"wall_s\": %.6f, \"kernel_s\": %.6f, "
           "\"printf_truncated\": %s, \"lockdown_s\": %.6f,\n \"lockdown\": ", status, now() - g_t0,
           g_kernel_s, g_printf_truncated ? "true" : "false", g_lockdown_s);
  out += head;
  json_string(out, g_lockdown);
  out += ",\n \"fatal\": ";
  if (fatal) write_finding(out, *fatal);
  else out += "null";
  out += ",\n \"findings\": [";
  for (size_t i = 0; i < g_findings.size(); i++) {
    out += i ? ",\n  " : "\n  ";
    write_finding(out, g_findings[i]);
  }
  out += ']';
  if (g_launch.checked) write_extents(out);
  if (g_launch.count) write_counters(out);
  out += "}\n";
  if (!write_all(g_result_fd, out.data(), out.size())) _exit(70);
  if (g_printf_fd >= 0) write_all(g_printf_fd, g_printf.data(), g_printf.size());
}

void finish_fatal(int kind, unsigned line, const char* msg, const __kp_thread* where, void* pc) {
  if (__atomic_exchange_n(&g_finishing, 1, __ATOMIC_SEQ_CST)) {
    for (;;) pause();  // another thread is already writing the result
  }
  Finding f{kind, line, msg, {}, where != nullptr, pc_offset(pc), 1};
  if (where) f.where = located(where);
  if (g_launch.checked && t_worker) merge_extents(t_worker);
  write_result("fault", &f);
  _exit(0);
}

// ---- buffers -------------------------------------------------------------------------------

static size_t page() { return (size_t)sysconf(_SC_PAGESIZE); }
static const unsigned char kCanary = 0xA5;
// Inaccessible address space on each side of a buffer: an overflow by up to this many bytes
// faults at once and is attributed to the buffer. Costs address space only.
static const size_t kGuardBytes = 1 << 20;

// Place a buffer so that its data ends next to a guard page (overflows fault at once) with
// canary-filled redzones around it (checked after the run, and bounds-checked in checked mode).
static void map_buffer(Arg& a) {
  size_t ps = page();
  size_t redzone = g_launch.checked ? 4096 : 0;
  size_t body = a.bytes + 2 * redzone + 64;
  size_t body_bytes = (body + ps - 1) / ps * ps;
  a.map_bytes = body_bytes + 2 * kGuardBytes;
  a.map = (unsigned char*)mmap(nullptr, a.map_bytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (a.map == MAP_FAILED) finish_fatal(__KP_F_LIMIT, 0, "cannot map a buffer", nullptr, nullptr);
  mprotect(a.map, kGuardBytes, PROT_NONE);
  mprotect(a.map + a.map_bytes - kGuardBytes, kGuardBytes, PROT_NONE);
  a.lo = a.map + kGuardBytes;
  a.hi = a.map + a.map_bytes - kGuardBytes;
  uintptr_t data_end = (uintptr_t)a.hi - redzone;
  a.data = (unsigned char*)((data_end - a.bytes) & ~(uintptr_t)63);  // 64-byte aligned start
  memset(a.lo, kCanary, a.hi - a.lo);
  // Output buffers stay open for the write-back: no file can be opened after the lockdown.
  int fd = open(a.path.c_str(), (a.writes_back ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
  size_t got = 0;
  while (fd >= 0 && got < a.bytes) {
    ssize_t n = read(fd, a.data + got, a.bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  if (fd < 0 || got != a.bytes) {
    Str msg = "cannot read buffer file for '" + a.name + "'";
    finish_fatal(__KP_F_LIMIT, 0, msg.c_str(), nullptr, nullptr);
  }
  if (a.writes_back) a.fd = fd;
  else close(fd);
  a.value_slot = &a.data;
}

static void check_canaries() {
  for (Arg& a : g_launch.args) {
    if (!a.is_buffer) continue;
    for (unsigned char* p = a.lo; p < a.hi; p++) {
      if (p >= a.data && p < a.data + a.bytes) { p = a.data + a.bytes - 1; continue; }
      if (*p == kCanary) continue;
      long long index = ((long long)(p - a.data)) / (long long)a.elem_size;
      char msg[256];
      snprintf(msg, sizeof msg, "out-of-bounds write to buffer '%s' near element %lld "
               "(valid 0..%zu), found after the run", a.name.c_str(), index,
               a.bytes / a.elem_size - 1);
      add_finding(__KP_F_OOB, 0, msg, nullptr, nullptr);
      break;
    }
  }
}

static void write_back() {
  for (Arg& a : g_launch.args) {
    if (!a.is_buffer || !a.writes_back) continue;
    if (!write_all(a.fd, a.data, a.bytes, 0)) {
      Str msg = "cannot write buffer file of '" + a.name + "'";
      finish_fatal(__KP_F_LIMIT, 0, msg.c_str(), nullptr, nullptr);
    }
  }
}

// ---- faults --------------------------------------------------------------------------------

// A fault this far below the fiber stacks is still a stack overflow (a big frame jumps past the
// guard in one step).
static const uintptr_t kStackSlack = 64 << 20;

static void on_signal(int sig, siginfo_t* info, void* uctx) {
  void* pc = nullptr;
#if defined(__x86_64__) && defined(__linux__)
  pc = (void*)((ucontext_t*)uctx)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__) && defined(__linux__)
  pc = (void*)((ucontext_t*)uctx)->uc_mcontext.pc;
#else
  (void)uctx;
#endif
  const __kp_thread* where = t_worker && t_worker->running ? &t_worker->running->pos : nullptr;
  uintptr_t addr = (uintptr_t)info->si_addr;
  char msg[256];
  int kind = 0;
  if (sig == SIGSEGV || sig == SIGBUS) {
    const Arg* b = buffer_of(addr);
    Worker* w = t_worker;
    if (b) {
      long long index = ((long long)addr - (long long)(uintptr_t)b->data) / (long long)b->elem_size;
      snprintf(msg, sizeof msg, "out-of-bounds access to buffer '%s' at element %lld (valid "
               "0..%zu)", b->name.c_str(), index, b->bytes / b->elem_size - 1);
      kind = __KP_F_OOB;
    } else if (w && w->stacks && addr + kStackSlack >= (uintptr_t)w->stacks &&
               addr < (uintptr_t)w->stacks + w->stack_stride * w->stack_count) {
      snprintf(msg, sizeof msg, "stack overflow of a simulated thread (%zu-byte stacks): large "
               "thread-local arrays or deep recursion", w->stack_size);
      kind = __KP_F_LIMIT;
    } else if (addr < 65536) {  // the first pages: an offset from a null pointer
      snprintf(msg, sizeof msg, "invalid memory access at address 0x%lx (not a kernel buffer: "
               "a null pointer, such as an extern __shared__ array when the launch gives no "
               "dynamic shared memory)", (unsigned long)addr);
      kind = __KP_F_OOB;
    } else {
      snprintf(msg, sizeof msg, "invalid memory access at address 0x%lx (not a kernel buffer)",
               (unsigned long)addr);
      kind = __KP_F_OOB;
    }
  } else if (sig == SIGSYS) {
    const char* name = syscall_name(info->si_syscall);
    snprintf(msg, sizeof msg, "the kernel made a system call the sandbox forbids (%s%snumber %d); "
             "a kernel has no business with the operating system", name, *name ? ", " : "",
             info->si_syscall);
    kind = __KP_F_SANDBOX;
  } else if (sig == SIGFPE) {
    snprintf(msg, sizeof msg, "arithmetic fault (integer division by zero or overflow)");
  } else {
    snprintf(msg, sizeof msg, "the kernel crashed with signal %d", sig);
  }
  finish_fatal(kind, 0, msg, where, pc);
}

static void install_signal_handlers() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
  for (int sig : faults) sigaction(sig, &sa, nullptr);
}

static void alt_stack() {
  stack_t ss;
  ss.ss_size = 1 << 16;
  ss.ss_sp = malloc(ss.ss_size);
  ss.ss_flags = 0;
  sigaltstack(&ss, nullptr);
}

// ---- request -------------------------------------------------------------------------------

[[noreturn]] static void bad_request(const Str& why) {
  fprintf(stderr, "kport-simhost: bad request: %s\n", why.c_str());
  exit(64);
}

static void parse_request(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) bad_request(Str("cannot open ") + path);
  char line[8192];
  Launch& L = g_launch;
  while (fgets(line, sizeof line, f)) {
    char key[32], s1[4096], s2[4096], mode[16];
    unsigned long long a, b, c;
    if (sscanf(line, "%31s", key) != 1) continue;
    Str k = key;
    if (k == "kernel" && sscanf(line, "%*s %4095s", s1) == 1) L.kernel_path = s1;
    else if (k == "groups" && sscanf(line, "%*s %llu %llu %llu", &a, &b, &c) == 3)
      L.groups[0] = a, L.groups[1] = b, L.groups[2] = c;
    else if (k == "tg" && sscanf(line, "%*s %llu %llu %llu", &a, &b, &c) == 3)
      L.tg[0] = a, L.tg[1] = b, L.tg[2] = c;
    else if (k == "grid" && sscanf(line, "%*s %llu %llu %llu", &a, &b, &c) == 3)
      L.grid_threads[0] = a, L.grid_threads[1] = b, L.grid_threads[2] = c;
    else if (k == "nonuniform" && sscanf(line, "%*s %llu", &a) == 1) L.nonuniform = a;
    else if (k == "tg_mem" && sscanf(line, "%*s %llu", &a) == 1) L.tg_mem_limit = a;
    else if (k == "dyn_smem" && sscanf(line, "%*s %llu", &a) == 1) L.dyn_smem = a;
    else if (k == "threads" && sscanf(line, "%*s %llu", &a) == 1) L.os_threads = (int)a;
    else if (k == "checked" && sscanf(line, "%*s %llu", &a) == 1) L.checked = a;
    else if (k == "count" && sscanf(line, "%*s %llu", &a) == 1) L.count = a;
    else if (k == "checks" && sscanf(line, "%*s %llu", &a) == 1)  // 1 bounds, 2 race, 4 uninit
      L.check_bounds = a & 1, L.check_race = a & 2, L.check_uninit = a & 4;
    else if (k == "stack" && sscanf(line, "%*s %llu", &a) == 1) L.stack_size = a;
    else if (k == "result" && sscanf(line, "%*s %4095s", s1) == 1) L.result_path = s1;
    else if (k == "printf" && sscanf(line, "%*s %4095s", s1) == 1) L.printf_path = s1;
    else if (k == "lockdown" && sscanf(line, "%*s %4095s", s1) == 1)
      L.lockdown_required = strcmp(s1, "optional") != 0;
    else if (k == "buffer" &&
             sscanf(line, "%*s %4095s %llu %llu %15s %4095s", s1, &a, &b, mode, s2) == 5) {
      Arg arg;
      arg.name = s1, arg.is_buffer = true, arg.elem_size = a ? a : 1, arg.bytes = b;
      arg.writes_back = strcmp(mode, "in") != 0, arg.path = s2;
      char extra[16] = "";
      arg.detached = sscanf(line, "%*s %*s %*s %*s %*s %*s %15s", extra) == 1 &&
                     strcmp(extra, "detached") == 0;
      L.args.push_back(move(arg));
    } else if (k == "pointer" && sscanf(line, "%*s %4095s %llu %4095s", s1, &a, s2) == 3) {
      Arg* owner = nullptr;
      for (Arg& x : L.args)
        if (!x.is_buffer && x.name == s1) owner = &x;
      if (!owner || a + sizeof(void*) > owner->scalar.size())
        bad_request(Str("pointer field outside its struct: ") + line);
      owner->pointers.push_back({(size_t)a, s2});
    } else if (k == "scalar" && sscanf(line, "%*s %4095s %4095s", s1, s2) == 2) {
      Arg arg;
      arg.name = s1;
      for (size_t i = 0; s2[i] && s2[i + 1]; i += 2) {
        unsigned byte;
        sscanf(s2 + i, "%2x", &byte);
        arg.scalar.push_back((unsigned char)byte);
      }
      arg.scalar.resize((arg.scalar.size() + 15) / 16 * 16 + 16);  // aligned room for any type
      L.args.push_back(move(arg));
    } else {
      bad_request(Str("cannot parse line: ") + line);
    }
  }
  fclose(f);
  if (L.kernel_path.empty() || L.result_path.empty()) bad_request("kernel and result are required");
}

static void load_kernel() {
  Launch& L = g_launch;
  void* lib = dlopen(L.kernel_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) bad_request(Str("cannot load kernel library: ") + dlerror());
  L.entry = (void (*)(void**))dlsym(lib, "__kp_kernel_entry");
  L.run_threads = (void (*)(void**, __kp_thread*))dlsym(lib, "__kp_kernel_run_threads");
  L.current_slot = (__kp_thread** (*)(void))dlsym(lib, "__kp_kernel_current_slot");
  L.view_slots = (__kp_view** (*)(void))dlsym(lib, "__kp_kernel_view_slots");
  L.tg_slot = (__kp_tg_check** (*)(void))dlsym(lib, "__kp_kernel_tg_slot");
  const int* sync = (const int*)dlsym(lib, "__kp_kernel_needs_sync");
  if (!L.entry || !L.run_threads || !L.current_slot || !L.view_slots || !L.tg_slot || !sync)
    bad_request("kernel library lacks the kp_* entry points");
  L.needs_sync = *sync;
  Dl_info info;
  if (dladdr((void*)L.entry, &info)) g_lib_base = (uintptr_t)info.dli_fbase;
}

}  // namespace __kp

using namespace __kp;

extern "C" void __kp_report(int kind, unsigned line, const char* msg) {
  const __kp_thread* where = t_worker && t_worker->running ? &t_worker->running->pos : nullptr;
  add_finding(kind, line, msg, where, __builtin_return_address(0));
}

extern "C" void __kp_fatal(int kind, unsigned line, const char* msg) {
  const __kp_thread* where = t_worker && t_worker->running ? &t_worker->running->pos : nullptr;
  finish_fatal(kind, line, msg, where, __builtin_return_address(0));
}

extern "C" int __kp_printf(const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  Lock lock(g_mutex);
  if (g_printf.size() + strlen(buf) > kMaxPrintf) g_printf_truncated = true;
  else g_printf += buf;
  return n;
}

static Vec<void** (*)(void)> g_dyn_slots;

extern "C" int __kp_register_dyn_smem(void** (*slot)(void)) {
  g_dyn_slots.push_back(slot);
  return 0;
}

static int open_output(const Str& path) {
  return path.empty() ? -1 : open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
                                  O_NOFOLLOW, 0600);
}

// The pool's threadgroups: each OS thread takes the next until none is left.
static uint64_t g_total_groups = 0, g_next_group = 0;

// One OS thread of the pool; `index` (a number, 0 for the main thread) names its Worker.
static void* work(void* index) {
  alt_stack();
  Worker* w = create<Worker>();
  w->index = (int)(intptr_t)index;
  t_worker = w;
  w->cur_slot = g_launch.current_slot();
  worker_setup(w);
  for (auto slot : g_dyn_slots) *slot() = w->dyn_smem;
  for (uint64_t g; (g = __atomic_fetch_add(&g_next_group, 1, __ATOMIC_SEQ_CST)) < g_total_groups;) {
    uint32_t gx = g % g_launch.groups[0];
    uint32_t gy = (g / g_launch.groups[0]) % g_launch.groups[1];
    uint32_t gz = g / ((uint64_t)g_launch.groups[0] * g_launch.groups[1]);
    run_group(w, gx, gy, gz);
    if (g_launch.checked) merge_extents(w);
  }
  if (g_launch.count) counters_worker_done();
  return nullptr;
}

[[noreturn]] static void cannot_lock_down(const Str& why) {
  fprintf(stderr, "kport-simhost: cannot lock down: %s\n", why.c_str());
  exit(65);
}

// Lock down, then load the kernel library: its static constructors already run inside the
// filter. A host that cannot lock down refuses unless the request made the lockdown optional.
static void lock_and_load() {
  // required: seccomp must go in; Landlock is taken where the kernel has it (the jail's own
  // read-only view already limits what a read could reach)
  bool required = g_launch.lockdown_required;
  double t0 = now();
  Lockdown lock = lock_before_load(g_launch.kernel_path.c_str());
  g_lockdown_s = now() - t0;
  if (required && !lock.seccomp) cannot_lock_down(lock.problem);
  load_kernel();
  if (lock.seccomp) {
    t0 = now();
    Str problem = lock_after_load();
    g_lockdown_s += now() - t0;
    if (required && !problem.empty()) cannot_lock_down(problem);
    lock.seccomp = problem.empty();
  }
  if (lock.landlock_abi && lock.seccomp) g_lockdown = "landlock+seccomp";
  else if (lock.landlock_abi || lock.seccomp) g_lockdown = lock.seccomp ? "seccomp" : "landlock";
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: kport-simhost REQUEST_FILE\n");
    return 64;
  }
  g_t0 = now();
  parse_request(argv[1]);
  g_result_fd = open_output(g_launch.result_path);
  g_printf_fd = open_output(g_launch.printf_path);
  if (g_result_fd < 0) bad_request("cannot create the result file");
  install_signal_handlers();
  alt_stack();
  for (Arg& a : g_launch.args) {
    if (a.is_buffer) map_buffer(a);
    else a.value_slot = a.scalar.data();
  }
  for (Arg& a : g_launch.args)
    for (auto& [offset, target] : a.pointers) {
      const Arg* buffer = nullptr;
      for (const Arg& b : g_launch.args)
        if (b.is_buffer && b.detached && b.name == target) buffer = &b;
      if (!buffer) bad_request("pointer field names no detached buffer: " + target);
      memcpy(a.scalar.data() + offset, &buffer->data, sizeof(void*));
    }
  for (Arg& a : g_launch.args)
    if (!a.detached) g_launch.arg_ptrs.push_back(a.value_slot);
#if defined(__GLIBC__)
  // Kernels are linked without libraries (-nostdlib, simbuild.py): their math calls bind to
  // this libm, loaded now because nothing can be opened once the lockdown is in place.
  dlopen("libm.so.6", RTLD_NOW | RTLD_GLOBAL);
#endif
  lock_and_load();
  if (g_launch.count) counters_setup();
  g_total_groups = (uint64_t)g_launch.groups[0] * g_launch.groups[1] * g_launch.groups[2];
  int nthreads = g_launch.os_threads > 0 ? g_launch.os_threads : 1;
  if ((uint64_t)nthreads > g_total_groups) nthreads = g_total_groups ? (int)g_total_groups : 1;
  Vec<pthread_t> pool;
  double t_start = now();
  for (int i = 1; i < nthreads; i++) {
    pthread_t t;  // a thread that cannot start leaves its groups to the others
    if (pthread_create(&t, nullptr, work, (void*)(intptr_t)i) == 0) pool.push_back(t);
  }
  work(nullptr);
  for (pthread_t t : pool) pthread_join(t, nullptr);
  g_kernel_s = now() - t_start;
  if (!g_launch.checked) check_canaries();  // checked mode already saw every access
  write_back();
  write_result("ok", nullptr);
  return 0;
}
