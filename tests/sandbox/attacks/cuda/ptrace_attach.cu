// attack: attaches to another process with ptrace
// expect: sandbox
#include <sys/ptrace.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    ptrace(PTRACE_ATTACH, 1, nullptr, nullptr);
  }
}
