"""CUB fidelity cases: the launches of kernels.cuh that cuda_sim (kport's CUB) and an NVIDIA GPU
(real CUB) both run on the same inputs, and the TempStorage types whose sizes they compare.

numpy only, so that it also runs on the NVIDIA machine, where

    python3 cases.py prepare DIR

writes DIR/{load,reduce,scan,warp}.cu (host programs that run each family's cases and write the
outputs), DIR/inputs_<family>.bin and DIR/sizes.cu (prints `label size align` per type). The
outputs come back as <family>.bin (records: name, NUL, uint64 byte count, bytes; read_records).
"""

from __future__ import annotations

import struct
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# "small": blocks and logical warps whose sizes are not powers of two (real CUB takes other code
# paths there, so they build apart: a failure there leaves the other families' results).
FAMILIES = ("load", "reduce", "scan", "warp", "small")
CTYPES = {"float": (np.float32, 1), "int": (np.int32, 1), "float2": (np.float32, 2)}


@dataclass(frozen=True)
class Case:
    """One launch: ``kernel`` (a template expression of kernels.cuh) over ``n_in`` elements of
    ``ctype`` in and ``n_out`` out, with the scalar arguments p0 and p1."""

    family: str
    kernel: str
    ctype: str
    grid: int
    block: tuple[int, int]
    n_in: int
    n_out: int
    p0: int
    p1: int = 0

    @property
    def name(self) -> str:
        return f"{self.kernel}({self.grid}x{self.block[0]}x{self.block[1]}, {self.p0}, {self.p1})"


def _hash(n: int, salt: int) -> np.ndarray:
    i = np.arange(n, dtype=np.uint64)
    h = (i * np.uint64(2654435761) + np.uint64(salt) * np.uint64(40503) + np.uint64(12345))
    h &= np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(2246822519)) & np.uint64(0xFFFFFFFF)
    return h ^ (h >> np.uint64(13))


def _spread(h: np.ndarray, shift: int = 0) -> np.ndarray:
    """Exact float32 values of 16-bit mantissas over 23 binades: float sums depend on order."""
    m = (h >> np.uint64(8)) % np.uint64(65536)
    e = (h % np.uint64(23)).astype(np.int64) - 11 + shift
    return (m.astype(np.float64) - 32768.0) * np.exp2(e.astype(np.float64))


def inputs(case: Case) -> np.ndarray:
    """The case's input array, the same bytes on every machine."""
    h = _hash(case.n_in, zlib.crc32(case.name.encode()))
    if case.ctype == "int":
        return ((h >> np.uint64(4)) % np.uint64(2001)).astype(np.int32) - 1000
    if case.ctype == "float":
        return _spread(h).astype(np.float32)
    a = ((h % np.uint64(512)) + np.uint64(512)).astype(np.float64) / 1024.0  # decay in [0.5, 1)
    return np.stack([a, _spread(h, -8)], axis=1).astype(np.float32)


def out_shape(case: Case) -> tuple[int, ...]:
    return (case.n_out, 2) if case.ctype == "float2" else (case.n_out,)


LOAD_ALGS = ("DIRECT", "STRIPED", "VECTORIZE", "TRANSPOSE", "WARP_TRANSPOSE",
             "WARP_TRANSPOSE_TIMESLICED")
REDUCE_ALGS = ("RAKING_COMMUTATIVE_ONLY", "RAKING", "WARP_REDUCTIONS")
SCAN_ALGS = ("RAKING", "RAKING_MEMOIZE", "WARP_SCANS")
SCAN_MODES = 13


def load_cases() -> list[Case]:
    found = []
    for bx, by, ipt in ((128, 1, 4), (64, 1, 8), (96, 1, 3), (32, 1, 1), (256, 1, 16), (16, 4, 4)):
        tile = bx * by * ipt
        for alg in LOAD_ALGS:
            kernel = (f"load_store_k<float, {bx}, {ipt}, cub::BLOCK_LOAD_{alg}, "
                      f"cub::BLOCK_STORE_{alg}, {by}>")
            for valid, default in ((-1, 0), (tile * 2 // 3 + 1, 0), (tile * 2 // 3 + 1, 1)):
                found.append(Case("load", kernel, "float", 2, (bx, by), 2 * tile, 4 * tile,
                                  valid, default))
    kernel = "load_store_k<int, 128, 4, cub::BLOCK_LOAD_TRANSPOSE, cub::BLOCK_STORE_TRANSPOSE, 1>"
    found.append(Case("load", kernel, "int", 2, (128, 1), 1024, 2048, 300, 0))
    return found


def reduce_cases() -> list[Case]:
    found = []
    for bt in (7, 32, 48, 64, 80, 96, 128, 160, 256, 1024):
        for alg in REDUCE_ALGS:
            for ctype in ("float", "int") if bt == 128 else ("float",):
                kernel = f"reduce_k<{ctype}, {bt}, cub::BLOCK_REDUCE_{alg}, 4>"
                found.append(Case("small" if bt < 32 else "reduce", kernel, ctype, 2, (bt, 1),
                                  2 * bt * 5, 10, bt * 2 // 3 + 1))
    for alg in REDUCE_ALGS:
        for bt, block in ((1024, 96), (1024, 100), (1024, 1000), (256, 64)):
            kernel = f"reduce_launch_k<{bt}, cub::BLOCK_REDUCE_{alg}>"
            found.append(Case("reduce", kernel, "float", 2, (block, 1), 2 * block, 2, 0))
    return found


def scan_cases() -> list[Case]:
    found = []
    for bt in (7, 32, 64, 80, 96, 128, 256, 1024):
        for alg in SCAN_ALGS:
            for ctype, ipt in (("float", 4), ("int", 4), ("float", 1)) if bt == 128 else \
                    (("float", 4),):
                kernel = f"scan_k<{ctype}, {bt}, cub::BLOCK_SCAN_{alg}, {ipt}>"
                tile = bt * ipt
                for mode in range(SCAN_MODES):
                    found.append(Case("small" if bt < 32 else "scan", kernel, ctype, 2,
                                      (bt, 1), 2 * 3 * tile, 2 * 4 * tile, mode, 5))
    for bt, ipt in ((32, 4), (64, 4), (128, 4), (128, 16)):
        for alg in ("WARP_SCANS", "RAKING"):
            tile = bt * ipt
            found.append(Case("scan", f"ssm_k<{bt}, cub::BLOCK_SCAN_{alg}, {ipt}>", "float2", 2,
                              (bt, 1), 2 * 3 * tile, 2 * (3 * tile + 3), 3))
    return found


def warp_cases() -> list[Case]:
    found = []
    shapes = [(32, 64, "float"), (32, 64, "int"), (16, 64, "float"), (8, 64, "float"),
              (4, 64, "float"), (2, 64, "float"), (1, 32, "float"), (24, 24, "float"),
              (7, 7, "float"), (5, 5, "float")]
    for lanes, block, ctype in shapes:
        for mode in range(10):
            family = "warp" if lanes & (lanes - 1) == 0 else "small"
            found.append(Case(family, f"warp_k<{ctype}, {lanes}>", ctype, 2, (block, 1),
                              2 * block, 4 * block, mode, lanes * 2 // 3 + 1))
    return found


def all_cases() -> dict[str, list[Case]]:
    found: dict[str, list[Case]] = {family: [] for family in FAMILIES}
    for case in load_cases() + reduce_cases() + scan_cases() + warp_cases():
        found[case.family].append(case)
    return found


# ---- TempStorage sizes ----------------------------------------------------------------------
SIZE_TYPES = ("char", "short", "float", "double", "float2", "float3", "float4")


def size_labels() -> list[str]:
    """C++ type expressions of the TempStorage types compared."""
    out = []
    transposing = ("TRANSPOSE", "WARP_TRANSPOSE", "WARP_TRANSPOSE_TIMESLICED")
    for alg in LOAD_ALGS:
        for t, b, ipt in (("float", 128, 4), ("float", 64, 8), ("double", 96, 3)):
            out.append(f"cub::BlockLoad<{t}, {b}, {ipt}, cub::BLOCK_LOAD_{alg}>::TempStorage")
            out.append(f"cub::BlockStore<{t}, {b}, {ipt}, cub::BLOCK_STORE_{alg}>::TempStorage")
    shapes = [("float", (32, 64, 96, 128, 256, 512, 1024), (1, 2, 3, 4, 5, 8, 16))]
    shapes += [(t, (64, 128), (1, 3, 4, 8)) for t in SIZE_TYPES if t != "float"]
    for alg in transposing:
        for t, blocks, ipts in shapes:
            for b in blocks:
                for ipt in ipts:
                    out.append(f"cub::BlockLoad<{t}, {b}, {ipt}, cub::BLOCK_LOAD_{alg}>"
                               "::TempStorage")
                    out.append(f"cub::BlockStore<{t}, {b}, {ipt}, cub::BLOCK_STORE_{alg}>"
                               "::TempStorage")
    for b in (48, 80, 100):
        for ipt in (1, 3, 4, 8):
            out.append(f"cub::BlockLoad<float, {b}, {ipt}, cub::BLOCK_LOAD_TRANSPOSE>::TempStorage")
            out.append(
                f"cub::BlockStore<float, {b}, {ipt}, cub::BLOCK_STORE_TRANSPOSE>::TempStorage")
    out.append("cub::BlockLoad<float, 16, 4, cub::BLOCK_LOAD_TRANSPOSE, 4>::TempStorage")
    out.append("cub::BlockLoad<float, 16, 4, cub::BLOCK_LOAD_WARP_TRANSPOSE, 4>::TempStorage")
    for t, b, ipt in (("float", 128, 4), ("float", 64, 8), ("double", 96, 3), ("char", 32, 16)):
        for sliced in ("false", "true"):
            out.append(f"cub::BlockExchange<{t}, {b}, {ipt}, {sliced}>::TempStorage")
    many = (1, 2, 7, 16, 31, 32, 33, 48, 64, 65, 80, 96, 100, 128, 160, 192, 200, 256, 384, 500,
            512, 768, 1000, 1024)
    for cls, algs in (("BlockReduce", REDUCE_ALGS), ("BlockScan", SCAN_ALGS)):
        prefix = "BLOCK_REDUCE" if cls == "BlockReduce" else "BLOCK_SCAN"
        for t in SIZE_TYPES:
            for b in many if t == "float" else (7, 32, 64, 96, 128, 256, 1024):
                for alg in algs:
                    out.append(f"cub::{cls}<{t}, {b}, cub::{prefix}_{alg}>::TempStorage")
    out.append("cub::BlockReduce<float, 16, cub::BLOCK_REDUCE_WARP_REDUCTIONS, 4>::TempStorage")
    out.append("cub::BlockScan<float, 8, cub::BLOCK_SCAN_RAKING, 8, 2>::TempStorage")
    for cls in ("WarpReduce", "WarpScan"):
        for t in SIZE_TYPES:
            for lanes in range(1, 33):
                out.append(f"cub::{cls}<{t}, {lanes}>::TempStorage")
    return out


def _size_group(label: str) -> str:
    """The class, with "_small" for sizes under 32 that are not powers of two."""
    cls = label.split("<")[0].split("::")[1]
    n = int(label.split("<")[1].split(",")[1].split(">")[0])
    return cls + ("_small" if n < 32 and n & (n - 1) else "")


def sizes_program(labels: list[str]) -> str:
    """A host program (for nvcc) printing `label<TAB>size<TAB>align` for every label."""
    lines = [f'  printf("%s\\t%zu\\t%zu\\n", "{label}", sizeof({label}), alignof({label}));'
             for label in labels]
    return ("#include <cstdio>\n#include <cub/cub.cuh>\nint main() {\n"
            '  printf("CUB_VERSION\\t%d\\t0\\n", (int)CUB_VERSION);\n'
            + "\n".join(lines) + "\n  return 0;\n}\n")


def sizes_kernel(labels: list[str]) -> str:
    """The same table for cuda_sim: out[2i], out[2i+1] = size, align of labels[i]."""
    lines = [f"  out[{2 * i}] = sizeof({label}); out[{2 * i + 1}] = alignof({label});"
             for i, label in enumerate(labels)]
    return ("#include <cub/cub.cuh>\nextern \"C\" __global__ void sizes(long long* out) {\n"
            + "\n".join(lines) + "\n}\n")


# ---- The GPU side -----------------------------------------------------------------------------
_HOST = r"""#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "kernels.cuh"

template <class T, class K>
static void run(const char* name, K kernel, int grid, dim3 block, size_t n_in, size_t n_out,
                int p0, int p1, FILE* in, FILE* out) {
  std::vector<T> h_in(n_in), h_out(n_out);
  if (fread(h_in.data(), sizeof(T), n_in, in) != n_in) exit(2);
  T *d_in, *d_out;
  cudaMalloc(&d_in, n_in * sizeof(T));
  cudaMalloc(&d_out, n_out * sizeof(T));
  cudaMemcpy(d_in, h_in.data(), n_in * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemset(d_out, 0, n_out * sizeof(T));
  kernel<<<grid, block>>>(d_in, d_out, p0, p1);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) { fprintf(stderr, "%s: %s\n", name, cudaGetErrorString(err)); exit(3); }
  cudaMemcpy(h_out.data(), d_out, n_out * sizeof(T), cudaMemcpyDeviceToHost);
  cudaFree(d_in);
  cudaFree(d_out);
  unsigned long long bytes = n_out * sizeof(T);
  fwrite(name, 1, strlen(name) + 1, out);
  fwrite(&bytes, sizeof bytes, 1, out);
  fwrite(h_out.data(), 1, bytes, out);
}

int main(int argc, char** argv) {
  FILE* in = fopen(argv[1], "rb");
  FILE* out = fopen(argv[2], "wb");
@CALLS@
  fclose(out);
  printf("%s: @COUNT@ cases\n", argv[0]);
  return 0;
}
"""


def host_program(cases: list[Case]) -> str:
    """The nvcc host program that runs ``cases`` in order on inputs_<family>.bin."""
    calls = [f'  run<{c.ctype}>("{c.name}", {c.kernel}, {c.grid}, dim3({c.block[0]}, '
             f"{c.block[1]}), {c.n_in}, {c.n_out}, {c.p0}, {c.p1}, in, out);" for c in cases]
    return _HOST.replace("@CALLS@", "\n".join(calls)).replace("@COUNT@", str(len(cases)))


def read_records(data: bytes) -> dict[str, bytes]:
    """The records of an outputs file: name -> raw bytes."""
    found, pos = {}, 0
    while pos < len(data):
        end = data.index(b"\0", pos)
        name = data[pos:end].decode()
        (size,) = struct.unpack_from("<Q", data, end + 1)
        found[name] = data[end + 9:end + 9 + size]
        pos = end + 9 + size
    return found


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for family, cases in all_cases().items():
        (folder / f"{family}.cu").write_text(host_program(cases))
        (folder / f"inputs_{family}.bin").write_bytes(b"".join(inputs(c).tobytes()
                                                               for c in cases))
    groups: dict[str, list[str]] = {}
    for label in size_labels():  # one program per group: a label real CUB rejects costs one
        groups.setdefault(_size_group(label), []).append(label)
    for group, labels in groups.items():
        (folder / f"sizes_{group}.cu").write_text(sizes_program(labels))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "prepare":
        prepare(Path(sys.argv[2]))
    else:
        sys.exit("usage: python3 cases.py prepare DIR")
