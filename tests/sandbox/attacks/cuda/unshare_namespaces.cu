// attack: makes new namespaces to escape the jail
// expect: sandbox
#include <sched.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    unshare(CLONE_NEWUSER | CLONE_NEWNS);
  }
}
