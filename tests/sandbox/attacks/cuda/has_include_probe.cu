// attack: __has_include probes the host's files through the compiler
// expect: no-effect
#if __has_include("/etc/passwd") || __has_include(<../../etc/shadow>)
#define FOUND 1.0f
#else
#define FOUND 0.0f
#endif
extern "C" __global__ void k(float* y) {
  if (threadIdx.x == 0) {
    y[0] = FOUND;
  }
}
