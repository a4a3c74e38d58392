// attack: system() runs a shell that writes the canary and leaves a sleeper
// expect: sandbox
#include <stdlib.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    system("touch @CANARY@/pwned; sleep 300; true @NONCE@");
  }
}
