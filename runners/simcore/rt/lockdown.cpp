// Landlock and seccomp for the simulator host. Two seccomp stages, stacked: the first (before
// dlopen) also lets the loader read and map the kernel library, the second (after) forbids
// opening files and making memory executable. A forbidden call raises SIGSYS, which host.cpp
// turns into a finding naming the call; the call itself never runs.
#include "lockdown.h"

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace __kp {
namespace {

// Landlock's ABI, spelled here so that older kernel headers still build the host.
struct LandlockRulesetAttr {
  uint64_t handled_access_fs, handled_access_net, scoped;
};
struct __attribute__((packed)) LandlockPathBeneath {
  uint64_t allowed_access;
  int32_t parent_fd;
};
const long kLandlockCreate = 444, kLandlockAddRule = 445, kLandlockRestrict = 446;
const uint32_t kLandlockVersion = 1u << 0;  // LANDLOCK_CREATE_RULESET_VERSION
const uint64_t kFsExecute = 1u << 0, kFsReadFile = 1u << 2;

uint64_t landlock_fs_rights(int abi) {
  uint64_t all = (1u << 13) - 1;  // ABI 1: execute .. make_sym
  if (abi >= 2) all |= 1u << 13;  // refer
  if (abi >= 3) all |= 1u << 14;  // truncate
  if (abi >= 5) all |= 1u << 15;  // ioctl_dev
  return all;
}

// Only `library` may be opened, for reading and mapping as code; no TCP bind/connect (ABI 4);
// no signals to or abstract sockets of processes outside this domain (ABI 6).
int install_landlock(const char* library, Str* problem) {
  int abi = (int)syscall(kLandlockCreate, nullptr, 0, kLandlockVersion);
  if (abi < 1) {
    *problem = "Landlock is not available in this kernel";
    return 0;
  }
  LandlockRulesetAttr attr = {landlock_fs_rights(abi), 0, 0};
  size_t size = sizeof(uint64_t);
  if (abi >= 4) attr.handled_access_net = 3, size = 2 * sizeof(uint64_t);
  if (abi >= 6) attr.scoped = 3, size = sizeof attr;
  int ruleset = (int)syscall(kLandlockCreate, &attr, size, 0);
  if (ruleset < 0) {
    *problem = Str("landlock_create_ruleset: ") + strerror(errno);
    return 0;
  }
  int lib = open(library, O_PATH | O_CLOEXEC);
  LandlockPathBeneath rule = {kFsExecute | kFsReadFile, lib};
  bool ok = lib >= 0 && syscall(kLandlockAddRule, ruleset, 1 /* PATH_BENEATH */, &rule, 0) == 0 &&
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
            syscall(kLandlockRestrict, ruleset, 0) == 0;
  if (!ok) *problem = Str("landlock rules: ") + strerror(errno);
  if (lib >= 0) close(lib);
  close(ruleset);
  return ok ? abi : 0;
}

#if defined(__x86_64__)
const uint32_t kArch = AUDIT_ARCH_X86_64;
#else
const uint32_t kArch = AUDIT_ARCH_AARCH64;
#endif

// Calls every stage allows outright: I/O on descriptors already open, memory, threads' own
// bookkeeping, signals to oneself, time, exit.
const long kAllowed[] = {
    __NR_read, __NR_write, __NR_readv, __NR_writev, __NR_pread64, __NR_pwrite64, __NR_lseek,
    __NR_close, __NR_fstat, __NR_newfstatat, __NR_statx, __NR_fcntl, __NR_fsync, __NR_fdatasync,
    __NR_munmap, __NR_madvise, __NR_brk, __NR_mremap, __NR_futex, __NR_set_robust_list,
    __NR_get_robust_list, __NR_rseq, __NR_set_tid_address, __NR_sched_yield,
    __NR_sched_getaffinity, __NR_getpid, __NR_getppid, __NR_gettid, __NR_uname, __NR_sysinfo,
    __NR_rt_sigaction, __NR_rt_sigprocmask, __NR_rt_sigreturn, __NR_sigaltstack, __NR_exit,
    __NR_exit_group, __NR_restart_syscall, __NR_clock_gettime, __NR_clock_getres,
    __NR_gettimeofday, __NR_clock_nanosleep, __NR_nanosleep, __NR_getrandom,
#if defined(__NR_time)
    __NR_time,
#endif
};
const long kSignalCalls[] = {__NR_kill, __NR_tgkill};

struct Filter {
  Vec<sock_filter> code;

  void op(uint16_t c, uint32_t k, uint8_t jt = 0, uint8_t jf = 0) {
    code.push_back(sock_filter{c, jt, jf, k});
  }
  void ret(uint32_t action) { op(BPF_RET | BPF_K, action); }
  void load_nr() { op(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)); }
  void load_arg(int i, bool high = false) {
    op(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args) + 8 * i + (high ? 4 : 0));
  }
  // if nr matches, run `block` (which must end in returns on every path), else go on.
  template <class Block>
  void when(long nr, Block block) {
    size_t at = code.size();
    op(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 0);
    block();
    code[at].jf = (uint8_t)(code.size() - at - 1);  // A still holds nr when skipped
  }
  // allow when arg `i` has none of `bits`, else trap
  void allow_without(int arg, uint32_t bits) {
    load_arg(arg);
    op(BPF_JMP | BPF_JSET | BPF_K, bits, 1, 0);
    ret(SECCOMP_RET_ALLOW);
    ret(SECCOMP_RET_TRAP);
  }
};

Vec<sock_filter> build_filter(bool loading) {
  Filter f;
  f.op(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  f.op(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0);
  f.ret(SECCOMP_RET_KILL_PROCESS);
  f.load_nr();
#if defined(__x86_64__)
  f.op(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);  // the x32 ABI
  f.ret(SECCOMP_RET_KILL_PROCESS);
#endif
  for (long nr : kAllowed) {
    f.op(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1);
    f.ret(SECCOMP_RET_ALLOW);
  }
  // new threads of this process, never new processes
  f.when(__NR_clone, [&] {
    f.load_arg(0);
    f.op(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1);
    f.ret(SECCOMP_RET_ALLOW);
    f.ret(SECCOMP_RET_TRAP);
  });
  f.when(__NR_clone3, [&] { f.ret(SECCOMP_RET_ERRNO | ENOSYS); });  // libc falls back to clone
  // reading limits (pthread_create does), never setting them
  f.when(__NR_prlimit64, [&] {
    f.load_arg(2);
    f.op(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3);
    f.load_arg(2, true);
    f.op(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1);
    f.ret(SECCOMP_RET_ALLOW);
    f.ret(SECCOMP_RET_TRAP);
  });
  // signals only to this process (abort() raises one)
  uint32_t self = (uint32_t)getpid();
  for (long nr : kSignalCalls) {
    f.when(nr, [&] {
      f.load_arg(0);
      f.op(BPF_JMP | BPF_JEQ | BPF_K, self, 0, 1);
      f.ret(SECCOMP_RET_ALLOW);
      f.ret(SECCOMP_RET_TRAP);
    });
  }
  f.when(__NR_ioctl, [&] { f.ret(SECCOMP_RET_ERRNO | ENOTTY); });  // stdio asks isatty
  if (loading) {
    // dlopen reads the library (Landlock limits which) and maps it as code
    f.when(__NR_openat, [&] {
      f.allow_without(2, O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | O_DIRECTORY | O_PATH);
    });
    f.when(__NR_mmap, [&] { f.ret(SECCOMP_RET_ALLOW); });
    f.when(__NR_mprotect, [&] { f.ret(SECCOMP_RET_ALLOW); });
    f.when(__NR_seccomp, [&] { f.ret(SECCOMP_RET_ALLOW); });  // for the second stage only
  } else {
    f.when(__NR_mmap, [&] { f.allow_without(2, PROT_EXEC); });
    f.when(__NR_mprotect, [&] { f.allow_without(2, PROT_EXEC); });
  }
  f.ret(SECCOMP_RET_TRAP);
  return f.code;
}

bool install_seccomp(bool loading, Str* problem) {
  Vec<sock_filter> code = build_filter(loading);
  sock_fprog prog = {(unsigned short)code.size(), code.data()};
  // (the first stage already set no_new_privs; the filter it installed forbids prctl)
  if ((loading && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ||
      syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, loading ? 0 : SECCOMP_FILTER_FLAG_TSYNC,
              &prog) != 0) {
    *problem = Str("seccomp: ") + strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

Lockdown lock_before_load(const char* library) {
  Lockdown out;
  Str landlock_problem, seccomp_problem;
  out.landlock_abi = install_landlock(library, &landlock_problem);
  out.seccomp = install_seccomp(true, &seccomp_problem);
  out.problem = landlock_problem + (landlock_problem.empty() || seccomp_problem.empty() ? "" : "; ")
                + seccomp_problem;
  return out;
}

Str lock_after_load() {
  Str problem;
  install_seccomp(false, &problem);
  return problem;
}

const char* syscall_name(long nr) {
  switch (nr) {
    case __NR_execve: return "execve";
    case __NR_execveat: return "execveat";
    case __NR_clone: return "clone (a new process)";
    case __NR_openat: return "openat";
    case __NR_openat2: return "openat2";
    case __NR_socket: return "socket";
    case __NR_connect: return "connect";
    case __NR_ptrace: return "ptrace";
    case __NR_kill: return "kill";
    case __NR_tgkill: return "tgkill";
    case __NR_mmap: return "mmap (executable)";
    case __NR_mprotect: return "mprotect (executable)";
    case __NR_prctl: return "prctl";
    case __NR_unlinkat: return "unlinkat";
    case __NR_symlinkat: return "symlinkat";
    case __NR_mkdirat: return "mkdirat";
    case __NR_prlimit64: return "prlimit64";
    case __NR_pipe2: return "pipe2";
    case __NR_unshare: return "unshare";
    case __NR_setns: return "setns";
    case __NR_mount: return "mount";
    case __NR_bind: return "bind";
    case __NR_dup3: return "dup3";
    case __NR_renameat2: return "renameat2";
    case __NR_memfd_create: return "memfd_create";
    case __NR_process_vm_writev: return "process_vm_writev";
#if defined(__NR_fork)
    case __NR_fork: return "fork";
    case __NR_vfork: return "vfork";
    case __NR_open: return "open";
    case __NR_unlink: return "unlink";
    case __NR_symlink: return "symlink";
    case __NR_pipe: return "pipe";
    case __NR_dup2: return "dup2";
    case __NR_rename: return "rename";
#endif
    default: return "";
  }
}

}  // namespace __kp

#else  // no Landlock or seccomp here (macOS, other architectures)

namespace __kp {
Lockdown lock_before_load(const char*) {
  Lockdown out;
  out.problem = "Landlock and seccomp exist only on Linux (x86_64, aarch64)";
  return out;
}
Str lock_after_load() { return "seccomp exists only on Linux (x86_64, aarch64)"; }
const char* syscall_name(long) { return ""; }
}  // namespace __kp

#endif
