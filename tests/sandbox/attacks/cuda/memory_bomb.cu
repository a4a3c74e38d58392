// attack: allocates and touches 64 GB
// expect: crash
#include <stdlib.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    volatile char* p = (volatile char*)malloc(64ull << 30); for (unsigned long long k = 0; k < (64ull << 30); k += 4096) p[k] = 1; y[0] = (float)(unsigned long long)p;
  }
}
