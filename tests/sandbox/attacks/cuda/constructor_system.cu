// attack: a static constructor runs system() when the library loads
// expect: sandbox
#include <stdlib.h>
__attribute__((constructor)) static void on_load() { system("touch @CANARY@/pwned; sleep 300; true @NONCE@"); }
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    y[0] = 1;
  }
}
