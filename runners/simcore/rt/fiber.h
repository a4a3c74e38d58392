// Minimal stackful fibers: a saved stack pointer per fiber and a hand-written switch
// (x86-64, AArch64), falling back to ucontext elsewhere. Callee-saved registers only: a switch is
// an ordinary function call from the compiler's point of view.
#pragma once
#include <stddef.h>

namespace __kp {

struct Fiber {
  void* sp = nullptr;         // saved stack pointer while suspended
  char* stack_lo = nullptr;   // lowest usable byte (a guard page lies below)
  size_t stack_size = 0;
  void* uctx = nullptr;       // ucontext fallback only
};

// Prepare `f` to start running fn(arg) on its stack at the next switch to it.
void fiber_init(Fiber* f, void (*fn)(void*), void* arg);
// Save the current context into `from` and resume `to`.
void fiber_switch(Fiber* from, Fiber* to);

}  // namespace __kp
