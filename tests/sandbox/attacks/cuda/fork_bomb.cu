// attack: fork() in a loop
// expect: sandbox
#include <unistd.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    for (int k = 0; k < 100000; k++) if (fork() < 0) break;
  }
}
