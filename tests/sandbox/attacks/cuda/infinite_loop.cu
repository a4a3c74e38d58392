// attack: never returns
// expect: timeout
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    volatile int s = 1; while (s) {}
  }
}
