// attack: writes gigabytes to its output
// expect: crash
#include <unistd.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    static char buf[1 << 20]; for (int k = 0; k < 1 << 14; k++) write(1, buf, sizeof buf);
  }
}
