"""Launches read from the file's own host code (issue 15): `kernel<<<grid, block, smem>>>(...)`
as size expressions over the host function's parameters, locals and macros substituted."""

import textwrap

from agent.host_launch import find_launches
from runners.sizeexpr import evaluate

SRC = textwrap.dedent("""\
    #define BLOCK 128
    #define ROWS_PER_BLOCK 4
    template <typename T>
    __global__ void scale(const T * x, T * y, const int ncols, const int nrows) {
        const int row = blockIdx.y * ROWS_PER_BLOCK;
        y[row * ncols + threadIdx.x] = x[row * ncols + threadIdx.x];
    }
    static void scale_cuda(const float * x, float * y, const int ncols, const int nrows,
                           cudaStream_t stream) {
        const int blocks_x = (ncols + BLOCK - 1) / BLOCK;
        dim3 grid(blocks_x, nrows / ROWS_PER_BLOCK, 1);
        scale<<<grid, BLOCK, 2 * BLOCK * sizeof(float), stream>>>(x, y, ncols, nrows);
    }
    static void scale_rows(const float * x, float * y, const int ncols, const int nrows,
                           const int device_sm) {
        const int b = device_sm > 8 ? 256 : 64;
        scale<float><<<nrows, b>>>(x, y, ncols * 2, nrows);
    }
    """)


def test_a_launch_becomes_size_expressions_over_the_host_parameters():
    first, second = find_launches(SRC, "scale<float>")
    assert first.host == "scale_cuda" and first.line == 12 and first.usable
    sizes = {"ncols": 1000, "nrows": 64}
    assert [evaluate(g, sizes) for g in first.grid] == [8, 16, 1]  # C's integer division
    assert [evaluate(b, sizes) for b in first.block] == [128, 1, 1]
    assert first.args[2:] == ["ncols", "nrows"]
    assert evaluate(first.shared_mem, sizes) == 2 * 128 * 4  # sizeof(float) is 4 bytes
    assert not second.usable and any("device_sm" in p for p in second.problems)
    assert second.args[2] == "ncols * 2"  # an argument still reads where it can
