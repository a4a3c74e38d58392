// attack: popen() starts a shell
// expect: sandbox
#include <stdio.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    FILE* p = popen("cat @SECRET@ > @CANARY@/copy; true @NONCE@", "r"); (void)p;
  }
}
