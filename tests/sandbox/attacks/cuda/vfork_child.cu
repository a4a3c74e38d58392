// attack: vfork() then exec
// expect: sandbox
#include <unistd.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    if (vfork() == 0) { execl("/bin/sh", "sh", "-c", "touch @CANARY@/pwned", (char*)nullptr); _exit(0); }
  }
}
