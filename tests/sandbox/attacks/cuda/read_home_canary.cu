// attack: reads a file in KPORT_HOME
// expect: sandbox
#include <fcntl.h>
#include <unistd.h>
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    int fd = open("@HOMECANARY@", O_RDONLY); char c = 0; if (fd >= 0) { read(fd, &c, 1); y[0] = c; }
  }
}
