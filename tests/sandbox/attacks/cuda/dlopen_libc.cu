// attack: loads a library to find system()
// expect: sandbox
#include <dlfcn.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    void* h = dlopen("libz.so.1", RTLD_NOW); y[0] = h ? 1 : 0;
  }
}
