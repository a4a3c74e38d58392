// attack: kills another process of the machine
// expect: sandbox
#include <signal.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    kill(@SENTINEL@, SIGKILL);
  }
}
