// attack: execve() replaces the simulator with a shell
// expect: sandbox
#include <unistd.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    char* argv[] = {(char*)"sh", (char*)"-c", (char*)"touch @CANARY@/pwned", nullptr}; execve("/bin/sh", argv, nullptr);
  }
}
