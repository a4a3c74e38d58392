// attack: copies the environment (keys, KPORT_HOME) into a file
// expect: sandbox
#include <stdio.h>
#include <stdlib.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    const char* h = getenv("KPORT_HOME"); FILE* f = fopen("@CANARY@/env", "w"); if (f) { fputs(h ? h : "none", f); fclose(f); }
  }
}
