// kport simulator runtime ABI: the contract between the dialect shims (metal/, cuda/) and runtime.cpp.
// The shims are header-only and inline; everything that needs the scheduler goes through these calls.
// A kernel TU includes a shim, which includes this file. Nothing here may depend on the C++ stdlib
// beyond <stddef.h>/<stdint.h>, so the TU stays quick to compile.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define __KP_SIMD_WIDTH 32
#define __KP_SLOT_BYTES 64  // largest per-lane payload of one collective (e.g. a double4, 2 matrix elems)

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define __KP_INSTRUMENTED 1
#endif
#endif
// Shim code that must not be instrumented (atomics, the runtime calls themselves).
#define __KP_NOSAN __attribute__((no_sanitize("thread")))
#define __KP_INLINE inline __attribute__((always_inline))

extern "C" {

// Where a thread is. One per simulated thread; `__kp_cur` points at the running one.
struct __kp_thread {
  uint32_t tid[3];        // thread position in threadgroup / threadIdx
  uint32_t gid[3];        // threadgroup position in grid / blockIdx
  uint32_t tg_size[3];    // actual threads in this group (Metal non-uniform edge groups are smaller)
  uint32_t tg_dispatch[3];// requested threadgroup size (dispatch_threads_per_threadgroup / blockDim)
  uint32_t grid[3];       // threads per grid (Metal) ; blocks per grid times blockDim (CUDA)
  uint32_t ngroups[3];    // threadgroups per grid / gridDim
  uint32_t linear;        // thread_index_in_threadgroup: tid.x + tid.y*tg.x + tid.z*tg.x*tg.y
  uint32_t lane;          // linear % 32
  uint32_t simd;          // linear / 32
  uint32_t nsimd;         // simd groups in this threadgroup (last may be partial)
  uint32_t simd_lanes;    // lanes that exist in this thread's simd group (32 except the last)
};

// kport's own memory (thread positions, argument slots, per-thread arrays of work-item loops)
// is read and written through this address space, which -fsanitize=thread leaves alone: the
// checks' hooks see only the kernel's own accesses. The code is the same as address space 0's.
#define __KP_RT __attribute__((address_space(7)))

// After a thread's position is written: checked builds' hooks read it (the race checks, and
// the counters pair a warp's lanes by it), so the stores must not sink past the kernel's body.
#if __has_feature(thread_sanitizer)
#define __KP_POSITION_SET() __asm__ volatile("" ::: "memory")
#else
#define __KP_POSITION_SET()
#endif

// The running thread. Defined (initial-exec TLS) by each kernel library (kernel_abi.h), which
// exports __kp_kernel_current_slot() so the scheduler can point it at the fiber it runs.
// `__kp_cur` reads it through __KP_RT and is a `__kp_thread __KP_RT*`.
extern __thread __kp_thread __KP_RT* __kp_cur_slot __attribute__((tls_model("initial-exec")));
#define __kp_cur (*(__kp_thread __KP_RT* __KP_RT*)&__kp_cur_slot)

// Severity and kind of a finding reported by a shim (the runtime adds thread/group/line).
enum __kp_finding_kind {
  __KP_F_DIVERGENCE = 1,    // barrier/collective reached by part of a group, or mismatched sites
  __KP_F_OOB = 2,           // out-of-bounds access
  __KP_F_RACE = 3,          // threadgroup memory race between two barriers
  __KP_F_INVALID = 4,       // invalid argument to a built-in (e.g. shuffle lane out of range)
  __KP_F_UNSUPPORTED = 5,   // construct the simulator does not model
  __KP_F_LIMIT = 6,         // resource limit exceeded (threadgroup memory, threads per group)
  __KP_F_UNINIT = 7,        // read of never-written threadgroup memory
  __KP_F_SANDBOX = 8,       // a system call the host's seccomp filter forbids (host only)
};
// Record a finding at the given source line (of the user's source). `msg` is copied.
void __kp_report(int kind, unsigned line, const char* msg);
// Record a finding and stop the whole launch (child exits with a fault result).
[[noreturn]] void __kp_fatal(int kind, unsigned line, const char* msg);

// ---- Collectives -----------------------------------------------------------------------------
// Rendezvous of the calling lane with the other lanes of its SIMD group (warp) that reach the same
// site (line, column) in this round. The lane publishes `size` bytes from `value`; on return
// *snapshot points at __KP_SIMD_WIDTH slots of __KP_SLOT_BYTES each (slot l = lane l's published bytes,
// valid only for lanes in the returned mask) and the return value is the mask of participating
// lanes (bit l = lane l). `required` is the CUDA member mask (0 = Metal semantics: whichever lanes
// arrive are the active set). Lanes of `required` that do not arrive are reported as divergence.
// The snapshot stays valid until the caller's next collective.
uint64_t __kp_simd_sync(const void* value, unsigned size, unsigned line, unsigned column,
                      uint32_t required, const unsigned char** snapshot);

// Threadgroup barrier (threadgroup_barrier / __syncthreads). Every live thread of the group must
// reach the same site; otherwise a divergence finding is recorded and the barrier still releases.
// `pred` takes part in the reduction returned: op 0 = none (returns 0), 1 = count of nonzero,
// 2 = all nonzero (and), 3 = any nonzero (or).
int __kp_barrier(unsigned line, unsigned column, int pred, int op);

// ---- Memory -----------------------------------------------------------------------------------
// Storage of a threadgroup/__shared__ variable for the running group. `site` is unique per
// declaration (address of a function-local static); every thread of the group gets the same
// address. Storage is poisoned (0xFF bytes) when a group starts. Exceeding the launch's limit of
// threadgroup memory is fatal (__KP_F_LIMIT) with the name of the variable.
void* __kp_tg_alloc(const void* site, size_t size, size_t align, const char* name, unsigned line);
// Dynamic shared memory of a CUDA launch (extern __shared__), poisoned at group start.
void* __kp_dyn_smem(void);
size_t __kp_dyn_smem_size(void);

// Checked builds: a buffer as the inline access checks (kport/checks.h) see it. The runtime
// points each worker's __kp_last_view[0] / [1] at the buffer the last read / write hit, and
// [2] / [3] at the one before (kernels that read two buffers in turn: a matmul's A and B).
struct __kp_view {
  uintptr_t data;          // the buffer's own bytes start here
  uintptr_t size[2];       // bytes a read [0] / a write [1] may reach: the buffer's; 0 for
                           // writes to an input (they go to the runtime, which reports them)
  int64_t lo[2], hi[2];    // lowest start and highest end offset reached: [0] reads, [1] writes
};
// Checked builds: the race and uninitialised-read state of one 4-byte word of threadgroup
// memory (and, in the runtime, of one byte of a word accessed a byte at a time). Epochs count
// barriers; kport/checks.h settles whole-word accesses that need no report inline.
struct alignas(32) __kp_tg_word {  // 32 bytes: a record's address is a shift away
  uint32_t w_epoch, r_epoch;    // barrier interval of the last write and of the last read(s)
  uint16_t w_thread, r_thread;  // the writer's and reader's linear id + 1 (0xFFFF: several)
  uint32_t w_simd, r_simd;      // their SIMD group's sync count at the access
  uint32_t slow;                // >= group_epoch: the runtime decides (not wholly inside one
                                // variable, or accessed in parts during this group)
  uint32_t shared;              // == the epoch: several threads read the word in this interval,
                                // none wrote it there, it was written in the group: a read
                                // needs nothing more (cleared by whatever else changes it)
};
// A worker's threadgroup memory as the inline checks see it.
struct __kp_tg_check {
  uintptr_t arena, bytes;     // the arena; bytes 0: every access goes to the runtime (counting)
  __kp_tg_word* words;        // one a 4-byte word of the arena, 4 more past its end
  const uint32_t* simd_epoch; // sync count of each SIMD group of the running group
  uint32_t epoch;             // bumps at every barrier and group start
  uint32_t group_epoch;       // a word whose w_epoch is below it was not written in this group
  uint32_t track;             // race or uninitialised-read checks asked for
};
// Each kernel library's slots for the two (kernel_abi.h defines them; the runtime points them
// at the running worker's records): what the inline checks read.
extern __thread __kp_view __KP_RT* __kp_last_view[4] __attribute__((tls_model("initial-exec")));
extern __thread __kp_tg_check __KP_RT* __kp_tg_state __attribute__((tls_model("initial-exec")));
// Everything the inline check does not settle: `aligned` when the compiler assumed n-byte
// alignment (a misaligned address is reported); `pc`, a return address in the kernel's code,
// locates the access.
void __kp_access(const void* addr, size_t size, int is_write, int aligned, void* pc);

// Check an access done by a shim built-in that is not instrumented (atomics): reports OOB against
// buffers and threadgroup arrays when the launch runs with full checks.
void __kp_check_access(const void* addr, size_t size, int is_write, unsigned line);

// Device printf: formatted text appended to the launch's captured output.
int __kp_printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Register a file-scope pointer that must point at the group's dynamic shared memory
// (`extern __shared__ T s[];` at namespace scope). `slot` returns the TLS slot of the variable.
int __kp_register_dyn_smem(void** (*slot)(void));

}  // extern "C"

// ---- Kernel entry -------------------------------------------------------------------------------
// Exported by every kernel library (kport/kernel_abi.h). __kp_kernel_entry runs one thread;
// `args[i]` points at argument i's value (buffer pointers stored as pointers, scalars as bytes).
extern "C" void __kp_kernel_entry(void** args);
extern "C" void __kp_kernel_run_threads(void** args, __kp_thread* group);  // no-fiber fast path
extern "C" __kp_thread** __kp_kernel_current_slot(void);
extern "C" __kp_view** __kp_kernel_view_slots(void);  // this OS thread's __kp_last_view[4]
extern "C" __kp_tg_check** __kp_kernel_tg_slot(void);  // this OS thread's __kp_tg_state
extern "C" const int __kp_kernel_needs_sync;      // 0: no barrier/collective in the source
extern "C" const char* const __kp_kernel_dialect; // "metal" or "cuda"
#include "workitems.h"
