// Call sites and findings: how the shim names a rendezvous and reports misuse to the runtime.
#pragma once
#pragma clang system_header
#include "traits.h"

namespace __kp {

// Collective bodies are emitted once per operand type, not inlined into every call site: a
// kernel with a few dozen unrolled collectives otherwise takes seconds to compile.
#define __KP_OUTLINE __attribute__((noinline))
// kport's own code that touches no memory of the kernel's (its arguments are values; it reads
// the runtime's lane slots and writes its own locals) is not checked (__KP_NOSAN): a checked
// build's access hooks there could find nothing, and they were most of the code a small
// kernel's checked build compiled (its reports' message formatting, a shuffle's slot reads).
// What such code calls must be always-inline: LLVM inlines a function checked one way into one
// checked the other only then, and the call would stay, to a checked copy.
#define __KP_COLLECTIVE __attribute__((noinline)) __KP_NOSAN
#define __KP_COLD __attribute__((noinline, cold)) __KP_NOSAN

// The user-source position of a built-in call; collectives meet at (line, column).
struct site {
  unsigned line, col;
};
// Default argument of every collective: it evaluates at the kernel's call, not here.
#define __KP_HERE (::__kp::site{__builtin_LINE(), __builtin_COLUMN()})

// A short message built on the stack (__kp_report copies it).
struct text {
  char buf[240];
  unsigned n = 0;
  __KP_NOSAN text() { buf[0] = 0; }
  __KP_NOSAN text& operator<<(const char* s) {
    while (*s && n + 1 < sizeof buf) buf[n++] = *s++;
    buf[n] = 0;
    return *this;
  }
  __KP_NOSAN text& operator<<(long v) {
    char tmp[24];
    int k = 0;
    unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
    do tmp[k++] = char('0' + u % 10); while (u /= 10);
    if (v < 0) tmp[k++] = '-';
    while (k && n + 1 < sizeof buf) buf[n++] = tmp[--k];
    buf[n] = 0;
    return *this;
  }
  __KP_NOSAN text& operator<<(int v) { return *this << long(v); }
  __KP_NOSAN text& operator<<(unsigned v) { return *this << long(v); }
};

__KP_COLD inline void report(int kind, site s, const text& t) { __kp_report(kind, s.line, t.buf); }

}  // namespace __kp
