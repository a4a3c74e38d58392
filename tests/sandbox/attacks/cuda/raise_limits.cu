// attack: raises its own resource limits
// expect: sandbox
#include <sys/resource.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    rlimit r = {RLIM_INFINITY, RLIM_INFINITY}; setrlimit(RLIMIT_AS, &r);
  }
}
