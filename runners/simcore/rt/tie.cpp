// kport-tie FD COMMAND ARG...: the first process of a jail. Runs COMMAND and ends with its
// status; if FD (the read end of a pipe whose only write end kport holds) reaches end of file
// first, kport has died, and the tie kills every process of the jail's PID namespace.
//
// Why: bubblewrap's pid 1 ties itself to the launcher (PR_SET_PDEATHSIG) only after the jail
// is set up, so a kport SIGKILLed in those milliseconds left the jail running its command. The
// pipe has no such window: its end of file comes whenever kport dies, before or after.
//
// Freestanding (no libc, raw system calls): the same static binary runs in a jail without /usr
// (a zig compile) and builds with any clang. Linux on x86_64 and aarch64.

#if !defined(__linux__) || !(defined(__x86_64__) || defined(__aarch64__))
#error "kport-tie is for Linux on x86_64 or aarch64"
#endif

typedef long i64;

namespace {

#if defined(__x86_64__)
enum : i64 { SYS_read = 0, SYS_write = 1, SYS_close = 3, SYS_clone = 56, SYS_execve = 59, SYS_exit_group = 231,
             SYS_wait4 = 61, SYS_kill = 62, SYS_getpid = 39, SYS_ppoll = 271 };

i64 sys(i64 n, i64 a = 0, i64 b = 0, i64 c = 0, i64 d = 0, i64 e = 0) {
  i64 ret;
  register i64 r10 __asm__("r10") = d;
  register i64 r8 __asm__("r8") = e;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                   : "rcx", "r11", "memory");
  return ret;
}
#else
enum : i64 { SYS_read = 63, SYS_write = 64, SYS_close = 57, SYS_clone = 220, SYS_execve = 221,
             SYS_exit_group = 94, SYS_wait4 = 260, SYS_kill = 129, SYS_getpid = 172,
             SYS_ppoll = 73 };

i64 sys(i64 n, i64 a = 0, i64 b = 0, i64 c = 0, i64 d = 0, i64 e = 0) {
  register i64 x8 __asm__("x8") = n;
  register i64 x0 __asm__("x0") = a;
  register i64 x1 __asm__("x1") = b;
  register i64 x2 __asm__("x2") = c;
  register i64 x3 __asm__("x3") = d;
  register i64 x4 __asm__("x4") = e;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
  return x0;
}
#endif

enum : i64 { SYS_pidfd_open = 434 };  // the same number on every architecture
enum : int { SIGKILL = 9, SIGCHLD = 17, POLLIN = 1, POLLHUP = 16, WNOHANG = 1, EINTR = 4,
             EXIT_USAGE = 64, EXIT_NO_COMMAND = 127, EXIT_KPORT_GONE = 128 + SIGKILL };

struct PollFd {
  int fd;
  short events, revents;
};

struct Time {
  i64 s, ns;
};

[[noreturn]] void leave(int code) {
  for (;;) sys(SYS_exit_group, code);
}

void say(const char* text) {
  i64 n = 0;
  while (text[n]) ++n;
  sys(SYS_write, 2, (i64)text, n);
}

int to_int(const char* s) {
  int v = 0;
  if (!*s) return -1;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return -1;
    v = v * 10 + (*s - '0');
  }
  return v;
}

bool has_slash(const char* s) {
  for (; *s; ++s)
    if (*s == '/') return true;
  return false;
}

// exec ``argv`` as a shell would: a bare name looked up in /usr/bin, then /bin (the jail's PATH).
[[noreturn]] void run(char** argv, char** envp) {
  if (has_slash(argv[0])) {
    sys(SYS_execve, (i64)argv[0], (i64)argv, (i64)envp);
  } else {
    static const char* const dirs[] = {"/usr/bin/", "/bin/"};
    for (const char* dir : dirs) {
      char path[4096];
      i64 n = 0;
      for (const char* p = dir; *p && n < 4000; ++p) path[n++] = *p;
      for (const char* p = argv[0]; *p && n < 4095; ++p) path[n++] = *p;
      path[n] = 0;
      sys(SYS_execve, (i64)path, (i64)argv, (i64)envp);
    }
  }
  say("kport-tie: cannot run ");
  say(argv[0]);
  say("\n");
  leave(EXIT_NO_COMMAND);
}

// The status a shell (and bubblewrap) reports: the exit code, or 128 + the signal.
int status_of(int w) {
  return (w & 0x7f) == 0 ? (w >> 8) & 0xff : 128 + (w & 0x7f);
}

[[noreturn]] void kport_gone(i64 child) {
  // In the jail's own PID namespace (bubblewrap's pid 1 started this as pid 2), kill(-1) reaches
  // every process of the jail and nothing outside it; elsewhere only the command itself.
  if (sys(SYS_getpid) == 2)
    sys(SYS_kill, -1, SIGKILL);
  sys(SYS_kill, child, SIGKILL);
  leave(EXIT_KPORT_GONE);
}

}  // namespace

extern "C" [[noreturn]] void tie_main(i64* sp) {
  int argc = (int)sp[0];
  char** argv = (char**)(sp + 1);
  char** envp = argv + argc + 1;
  int lifeline = argc >= 3 ? to_int(argv[1]) : -1;
  if (lifeline < 0) {
    say("usage: kport-tie FD COMMAND [ARG...]\n");
    leave(EXIT_USAGE);
  }
  i64 child = sys(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  if (child < 0) leave(EXIT_NO_COMMAND);
  if (child == 0) {
    sys(SYS_close, lifeline);
    run(argv + 2, envp);
  }
  int done = (int)sys(SYS_pidfd_open, child, 0);
  PollFd fds[2] = {{lifeline, POLLIN, 0}, {done, POLLIN, 0}};
  Time tick = {0, 20 * 1000 * 1000};  // without a pidfd (Linux < 5.3): look every 20 ms
  for (;;) {
    int w = 0;
    i64 ended = sys(SYS_wait4, child, (i64)&w, WNOHANG, 0);
    if (ended == child) leave(status_of(w));
    if (ended < 0 && ended != -EINTR) leave(EXIT_NO_COMMAND);
    fds[0].revents = fds[1].revents = 0;
    i64 ready = sys(SYS_ppoll, (i64)fds, done >= 0 ? 2 : 1, done >= 0 ? 0 : (i64)&tick, 0, 8);
    if (ready > 0 && (fds[0].revents & (POLLIN | POLLHUP))) {
      char byte;
      if (sys(SYS_read, lifeline, (i64)&byte, 1) <= 0) kport_gone(child);
    }
  }
}

#if defined(__x86_64__)
__asm__(".text\n.globl _start\n_start:\n  xor %rbp, %rbp\n  mov %rsp, %rdi\n"
        "  and $-16, %rsp\n  call tie_main\n  hlt\n");
#else
__asm__(".text\n.globl _start\n_start:\n  mov x29, #0\n  mov x30, #0\n  mov x0, sp\n"
        "  bl tie_main\n  brk #0\n");
#endif
