// attack: #embed a host file into the kernel
// expect: compile
const char data[] = {
#embed "/etc/passwd"
};
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    y[0] = data[0];
  }
}
