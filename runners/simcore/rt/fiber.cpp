// Context switch for the fiber scheduler. Why hand-written: swapcontext makes a sigprocmask
// system call per switch, and a barrier-heavy kernel switches millions of times.
#include "fiber.h"

#include <stdint.h>
#include <stdlib.h>

#if defined(__APPLE__)
#define __KP_SYM(x) "_" #x
#else
#define __KP_SYM(x) #x
#endif

#if defined(__x86_64__) && !defined(_WIN32)
#define __KP_ASM_SWITCH 1
// __kp_switch(void** save_sp, void* new_sp): push callee-saved regs, swap stacks. The FP control
// registers (mxcsr, x87 cw) are not switched: kernels never change them, and ldmxcsr/fldcw
// cost more than the rest of the switch.
asm(".text\n.globl " __KP_SYM(__kp_switch) "\n" __KP_SYM(__kp_switch) ":\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n"
    ".globl " __KP_SYM(__kp_fiber_trampoline) "\n" __KP_SYM(__kp_fiber_trampoline) ":\n"
    "  movq %r12, %rdi\n  callq *%r13\n  ud2\n");
#elif defined(__aarch64__)
#define __KP_ASM_SWITCH 1
asm(".text\n.globl " __KP_SYM(__kp_switch) "\n.p2align 2\n" __KP_SYM(__kp_switch) ":\n"
    "  sub sp, sp, #176\n"
    "  stp x19, x20, [sp, #0]\n  stp x21, x22, [sp, #16]\n  stp x23, x24, [sp, #32]\n"
    "  stp x25, x26, [sp, #48]\n  stp x27, x28, [sp, #64]\n  stp x29, x30, [sp, #80]\n"
    "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n  stp d12, d13, [sp, #128]\n"
    "  stp d14, d15, [sp, #144]\n"
    "  mov x2, sp\n  str x2, [x0]\n  mov sp, x1\n"
    "  ldp x19, x20, [sp, #0]\n  ldp x21, x22, [sp, #16]\n  ldp x23, x24, [sp, #32]\n"
    "  ldp x25, x26, [sp, #48]\n  ldp x27, x28, [sp, #64]\n  ldp x29, x30, [sp, #80]\n"
    "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n  ldp d12, d13, [sp, #128]\n"
    "  ldp d14, d15, [sp, #144]\n"
    "  add sp, sp, #176\n  ret\n"
    ".globl " __KP_SYM(__kp_fiber_trampoline) "\n.p2align 2\n" __KP_SYM(__kp_fiber_trampoline) ":\n"
    "  mov x0, x19\n  blr x20\n  brk #0\n");
#else
#include <ucontext.h>
#endif

namespace __kp {

#ifdef __KP_ASM_SWITCH
extern "C" void __kp_switch(void** save_sp, void* new_sp);
extern "C" void __kp_fiber_trampoline();

void fiber_init(Fiber* f, void (*fn)(void*), void* arg) {
  uintptr_t top = ((uintptr_t)(f->stack_lo + f->stack_size)) & ~(uintptr_t)15;
  uint64_t* sp;
#if defined(__x86_64__)
  // Frame popped by __kp_switch: [r15][r14][r13][r12][rbx][rbp][ret]; after `ret` the stack
  // pointer is 16-byte aligned, so the trampoline's call sees the ABI alignment.
  sp = (uint64_t*)(top - 8 - 6 * 8);
  sp[0] = 0;                  // r15
  sp[1] = 0;                  // r14
  sp[2] = (uint64_t)fn;       // r13
  sp[3] = (uint64_t)arg;      // r12
  sp[4] = 0;                  // rbx
  sp[5] = 0;                  // rbp
  sp[6] = (uint64_t)&__kp_fiber_trampoline;
#else
  sp = (uint64_t*)(top - 176);
  for (int i = 0; i < 22; i++) sp[i] = 0;
  sp[0] = (uint64_t)arg;                    // x19
  sp[1] = (uint64_t)fn;                     // x20
  sp[11] = (uint64_t)&__kp_fiber_trampoline;  // x30
#endif
  f->sp = sp;
}

void fiber_switch(Fiber* from, Fiber* to) { __kp_switch(&from->sp, to->sp); }

#else  // ucontext fallback

void fiber_init(Fiber* f, void (*fn)(void*), void* arg) {
  if (!f->uctx) f->uctx = calloc(1, sizeof(ucontext_t));
  ucontext_t* u = (ucontext_t*)f->uctx;
  getcontext(u);
  u->uc_stack.ss_sp = f->stack_lo;
  u->uc_stack.ss_size = f->stack_size;
  u->uc_link = nullptr;
  makecontext(u, (void (*)())fn, 1, arg);  // pointer-in-int: fine on LP64 glibc
}

void fiber_switch(Fiber* from, Fiber* to) {
  if (!from->uctx) from->uctx = calloc(1, sizeof(ucontext_t));
  swapcontext((ucontext_t*)from->uctx, (ucontext_t*)to->uctx);
}
#endif

}  // namespace __kp
