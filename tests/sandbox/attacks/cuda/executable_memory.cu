// attack: maps memory executable to run its own machine code
// expect: sandbox
#include <sys/mman.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); y[0] = p ? 1 : 0;
  }
}
