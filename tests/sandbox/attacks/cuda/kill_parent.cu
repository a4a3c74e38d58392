// attack: kills its parent (kport)
// expect: sandbox
#include <signal.h>
#include <unistd.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    kill(getppid(), SIGKILL); kill(-1, SIGKILL);
  }
}
