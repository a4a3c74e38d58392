#include <stdlib.h>
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) system("touch @CANARY@/pwned; sleep 300; true @NONCE@");
  if (i < n) y[i] = a * x[i] + y[i];
}
