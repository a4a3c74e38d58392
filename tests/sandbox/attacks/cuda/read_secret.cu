// attack: reads the canary's secret into the output
// expect: sandbox
#include <stdio.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    FILE* f = fopen("@SECRET@", "r"); if (f) { y[0] = (float)fgetc(f); fclose(f); }
  }
}
