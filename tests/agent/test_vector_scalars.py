"""CUDA vectors passed by value (issue 15: llama.cpp passes `uint3` fast-division constants
that its host computes with init_fastdiv_values): the bytes as CUDA lays them out (12 for a
uint3, which Metal reads as packed_uint3), the values from the host launch, and a package whose
run() computes them from the sizes."""

from __future__ import annotations

import json
import textwrap

import numpy as np

from runners.sizeexpr import evaluate
from tests.cli import kport, load_package


def test_fast_division_constants_divide_every_32_bit_numerator():
    """n / d == (umulhi(n, m) + n) >> L, with m = fastdiv_mult(d) and L = ceil_log2(d),
    checked by brute force (the property, not values copied from the code)."""
    rng = np.random.default_rng(0)
    for d in [1, 2, 3, 5, 7, 64, 300, 1000003, 2**31 - 1, 2**31 + 11, 2**32 - 1]:
        m = evaluate("fastdiv_mult(d)", {"d": d})
        shift = evaluate("ceil_log2(d)", {"d": d})
        for n in [0, 1, d - 1, d, d + 1, 2**32 - 1, *rng.integers(0, 2**32, 200).tolist()]:
            hi = (n * m) >> 32
            assert (hi + n) >> shift == n // d, (d, n)


SRC = textwrap.dedent("""\
    #include <cstdint>
    #define BLOCK 128
    static __device__ uint2 div_mod(uint32_t n, const uint3 f) {
        const uint32_t q = (__umulhi(n, f.x) + n) >> f.y;
        return make_uint2(q, n - q * f.z);
    }
    static const uint3 init_fastdiv_values(uint64_t d_64) {
        uint32_t d = (uint32_t) d_64, L = 0;
        while (L < 32 && (uint32_t{1} << L) < d) L++;
        uint32_t mp = (uint32_t) ((uint64_t{1} << 32) * ((uint64_t{1} << L) - d) / d + 1);
        return make_uint3(mp, L, d);
    }
    __global__ void transpose_rows(const float * x, float * y, const uint3 cols_fd,
                                   const int rows) {
        const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= rows * cols_fd.z) return;
        const uint2 rc = div_mod(i, cols_fd);  // row, column of x
        y[rc.y * rows + rc.x] = x[i];
    }
    static void transpose_rows_cuda(const float * x, float * y, const int cols, const int rows) {
        const uint3 cols_fd = init_fastdiv_values(cols);
        transpose_rows<<<(rows * cols + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, cols_fd, rows);
    }
    """)


def test_a_uint3_the_host_computes_ports_and_run_computes_it(tmp_path):
    path = tmp_path / "t.cu"
    path.write_text(SRC)
    out = tmp_path / "pkg"
    proc = kport("port", str(path), "--kernel", "transpose_rows", "--offline", "--no-kb",
                 "--size", "cols=37", "--size", "rows=9", "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads((out / "report.json").read_text())
    assert any(g.startswith("cols_fd (uint3): (fastdiv_mult(cols), ceil_log2(cols), cols)")
               for g in rep["guessed"])
    assert "packed_uint3" in (out / "kernel.metal").read_text()
    module = load_package(out, "kport_fd_port")
    x = np.arange(5 * 300, dtype=np.float32)
    got = module.run(x=x, rows=5, cols=300)  # cols_fd left out: computed from cols
    np.testing.assert_array_equal(np.asarray(got["y"]).reshape(300, 5), x.reshape(5, 300).T)
