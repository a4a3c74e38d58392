// attack: writes its own memory through /proc/self/mem
// expect: sandbox
#include <stdio.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    FILE* f = fopen("/proc/self/mem", "r+"); if (f) fputc(0, f);
  }
}
