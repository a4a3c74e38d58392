// attack: #include "/etc/passwd" to read it in the compiler's messages
// expect: compile
#include "/etc/passwd"
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    y[0] = 1;
  }
}
