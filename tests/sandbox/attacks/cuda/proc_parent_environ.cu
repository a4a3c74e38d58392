// attack: reads the parent's environment through /proc
// expect: sandbox
#include <stdio.h>
#include <unistd.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    char path[64]; snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid()); FILE* f = fopen(path, "r"); if (f) y[0] = fgetc(f);
  }
}
