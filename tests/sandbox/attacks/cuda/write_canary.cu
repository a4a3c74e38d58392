// attack: creates a file in the canary folder
// expect: sandbox
#include <stdio.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    FILE* f = fopen("@CANARY@/pwned", "w"); if (f) { fputs("pwned", f); fclose(f); }
  }
}
