"""Inline PTX fidelity cases: the kernels of kernels.cu, each run on the same inputs in cuda_sim
(runners/ptx.py lowers the PTX) and on an NVIDIA GPU (nvcc), compared output by output.

numpy only, so that it also runs on the NVIDIA machine, where

    python3 cases.py prepare DIR

writes DIR/main.cu (a host program that runs every kernel and writes ``name<TAB>hex words`` per
kernel to its first argument) and DIR/kernels.cu.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
THREADS = 256  # 2 blocks of 128 threads
WORDS_OUT = 8  # per thread
KERNELS = ("ptx_lanes", "ptx_loads", "ptx_stores", "ptx_prmt", "ptx_lop3", "ptx_shfl", "ptx_cvt",
           "ptx_arith", "ptx_pack", "ptx_approx", "ptx_pred")
APPROX = {"ptx_approx"}  # compared with a tolerance: .approx is not correctly rounded
BLOCK = {"ptx_lanes": (16, 8, 1)}  # the others: (128, 1, 1)


def inputs() -> np.ndarray:
    """4 * THREADS hashed words (the same in main.cu's hash)."""
    i = np.arange(4 * THREADS, dtype=np.uint64)
    h = (i * np.uint64(2654435761) + np.uint64(12345)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(2246822519)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(13)
    return h.astype(np.uint32)


def block(kernel: str) -> tuple[int, int, int]:
    return BLOCK.get(kernel, (128, 1, 1))


MAIN = r"""#include <cstdio>
#include "kernels.cu"
typedef void (*kernel_t)(const unsigned*, unsigned*);
int main(int argc, char** argv) {
  const int n_in = 4 * %(threads)d, n_out = %(words)d * %(threads)d;
  unsigned h_in[4 * %(threads)d];
  for (unsigned long long i = 0; i < (unsigned long long)n_in; ++i) {
    unsigned long long h = (i * 2654435761ull + 12345ull) & 0xFFFFFFFFull;
    h ^= h >> 15; h = (h * 2246822519ull) & 0xFFFFFFFFull; h ^= h >> 13;
    h_in[i] = (unsigned)h;
  }
  unsigned *d_in, *d_out, h_out[%(words)d * %(threads)d];
  cudaMalloc(&d_in, n_in * 4); cudaMalloc(&d_out, n_out * 4);
  cudaMemcpy(d_in, h_in, n_in * 4, cudaMemcpyHostToDevice);
  FILE* f = fopen(argv[1], "w");
  struct { const char* name; kernel_t k; dim3 block; } ks[] = {%(table)s};
  for (auto& k : ks) {
    cudaMemset(d_out, 0, n_out * 4);
    k.k<<<2, k.block>>>(d_in, d_out);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(h_out, d_out, n_out * 4, cudaMemcpyDeviceToHost);
    fprintf(f, "%%s\t%%s", k.name, e == cudaSuccess ? "ok" : cudaGetErrorString(e));
    for (int i = 0; i < n_out; ++i) fprintf(f, " %%08x", h_out[i]);
    fprintf(f, "\n");
  }
  fclose(f);
  return 0;
}
"""


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    table = ", ".join(f'{{"{k}", {k}, dim3({", ".join(map(str, block(k)))})}}' for k in KERNELS)
    (folder / "main.cu").write_text(MAIN % {"threads": THREADS, "words": WORDS_OUT,
                                            "table": table})
    (folder / "kernels.cu").write_text((HERE / "kernels.cu").read_text())


def read_outputs(path: Path) -> dict[str, np.ndarray]:
    """name -> output words, from main.cu's file (a kernel that failed is left out)."""
    out = {}
    for line in path.read_text().splitlines():
        name, rest = line.split("\t")
        status, *words = rest.split(" ")
        if status == "ok":
            out[name] = np.array([int(w, 16) for w in words], dtype=np.uint32)
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "prepare":
        prepare(Path(sys.argv[2]))
    else:
        sys.exit("usage: python3 cases.py prepare DIR")
