// attack: makes its stack executable
// expect: sandbox
#include <sys/mman.h>
#include <stdint.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    char buf[8192]; uintptr_t pg = ((uintptr_t)buf + 4095) & ~(uintptr_t)4095; mprotect((void*)pg, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
  }
}
