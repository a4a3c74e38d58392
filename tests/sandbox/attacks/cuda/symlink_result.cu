// attack: replaces its result file by a link to the secret
// expect: sandbox
#include <unistd.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    unlink("result.json"); symlink("@SECRET@", "result.json");
  }
}
