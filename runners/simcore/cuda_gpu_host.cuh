// Host side of runners.cuda_gpu: appended to the user's CUDA source and compiled with nvcc. It
// reads the same request file as kport-simhost, runs the kernel on the real GPU and writes a
// JSON result (status, CUDA error, median and least kernel time over `reps` timed launches).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace __kp_gpu {

struct Arg {
  std::string name, path, mode;
  size_t elem = 1, bytes = 0;
  bool buffer = false;
  std::vector<unsigned char> scalar;
  void* device = nullptr;
  void* host = nullptr;
};

static void fail(const char* result, const char* what, cudaError_t err) {
  FILE* out = fopen(result, "w");
  if (out) {
    fprintf(out, "{\"status\": \"fault\", \"error\": \"%s: %s\"}\n", what, cudaGetErrorString(err));
    fclose(out);
  }
  exit(0);
}

template <class... A, size_t... I>
static void launch(void (*f)(A...), void** a, std::index_sequence<I...>, dim3 g, dim3 b,
                   size_t smem) {
  f<<<g, b, smem>>>(*(typename std::remove_reference<A>::type*)a[I]...);
}

template <class... A>
static void launch(void (*f)(A...), void** a, dim3 g, dim3 b, size_t smem) {
  launch(f, a, std::index_sequence_for<A...>{}, g, b, smem);
}

template <class F>
static int host_main(int argc, char** argv, F kernel) {
  if (argc != 2) return 64;
  FILE* f = fopen(argv[1], "r");
  if (!f) return 64;
  unsigned g[3] = {1, 1, 1}, b[3] = {1, 1, 1};
  size_t smem = 0, reps = 0;
  std::string result;
  std::vector<Arg> args;
  char line[8192], key[32], s1[4096], s2[4096], mode[16];
  unsigned long long x, y, z;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "%31s", key) != 1) continue;
    std::string k = key;
    if (k == "groups" && sscanf(line, "%*s %llu %llu %llu", &x, &y, &z) == 3)
      g[0] = x, g[1] = y, g[2] = z;
    else if (k == "tg" && sscanf(line, "%*s %llu %llu %llu", &x, &y, &z) == 3)
      b[0] = x, b[1] = y, b[2] = z;
    else if (k == "dyn_smem" && sscanf(line, "%*s %llu", &x) == 1) smem = x;
    else if (k == "reps" && sscanf(line, "%*s %llu", &x) == 1) reps = x;
    else if (k == "result" && sscanf(line, "%*s %4095s", s1) == 1) result = s1;
    else if (k == "buffer" &&
             sscanf(line, "%*s %4095s %llu %llu %15s %4095s", s1, &x, &y, mode, s2) == 5) {
      Arg a;
      a.name = s1, a.elem = x, a.bytes = y, a.mode = mode, a.path = s2, a.buffer = true;
      args.push_back(a);
    } else if (k == "scalar" && sscanf(line, "%*s %4095s %4095s", s1, s2) == 2) {
      Arg a;
      a.name = s1;
      for (size_t i = 0; s2[i] && s2[i + 1]; i += 2) {
        unsigned byte;
        sscanf(s2 + i, "%2x", &byte);
        a.scalar.push_back((unsigned char)byte);
      }
      a.scalar.resize(a.scalar.size() + 16);
      args.push_back(a);
    }
  }
  fclose(f);
  std::vector<void*> ptrs;
  for (Arg& a : args) {
    if (!a.buffer) { ptrs.push_back(a.scalar.data()); continue; }
    a.host = malloc(a.bytes ? a.bytes : 1);
    FILE* in = fopen(a.path.c_str(), "rb");
    if (!in || fread(a.host, 1, a.bytes, in) != a.bytes) return 65;
    fclose(in);
    cudaError_t err = cudaMalloc(&a.device, a.bytes ? a.bytes : 1);
    if (err) fail(result.c_str(), "cudaMalloc", err);
    cudaMemcpy(a.device, a.host, a.bytes, cudaMemcpyHostToDevice);
    ptrs.push_back(&a.device);
  }
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem);
  dim3 grid(g[0], g[1], g[2]), block(b[0], b[1], b[2]);
  launch(kernel, ptrs.data(), grid, block, smem);
  cudaError_t err = cudaDeviceSynchronize();
  if (!err) err = cudaGetLastError();
  if (err) fail(result.c_str(), "kernel launch", err);
  for (Arg& a : args) {
    if (!a.buffer || a.mode == "in") continue;
    cudaMemcpy(a.host, a.device, a.bytes, cudaMemcpyDeviceToHost);
    FILE* out = fopen(a.path.c_str(), "r+b");
    if (!out || fwrite(a.host, 1, a.bytes, out) != a.bytes) return 65;
    fclose(out);
  }
  // Timing runs after the results are saved, so repeated launches cannot change them.
  std::vector<float> ms;
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  for (size_t r = 0; r < reps; r++) {
    cudaEventRecord(t0);
    launch(kernel, ptrs.data(), grid, block, smem);
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float m = 0;
    cudaEventElapsedTime(&m, t0, t1);
    ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  FILE* out = fopen(result.c_str(), "w");
  if (!out) return 66;
  fprintf(out, "{\"status\": \"ok\", \"median_ms\": %.6f, \"min_ms\": %.6f, "
          "\"reps\": %zu}\n", ms.empty() ? 0.0 : ms[ms.size() / 2], ms.empty() ? 0.0 : ms[0],
          ms.size());
  fclose(out);
  return 0;
}

}  // namespace __kp_gpu
