"""Launches read from the file's own host code (issue 15): `kernel<<<grid, block, smem>>>(...)`
as size expressions over the host function's parameters, locals and macros substituted."""

import textwrap

import pytest

from agent.case_guess import resolve_kernel
from agent.host_launch import find_launches, instantiations, matches
from runners.errors import KportError
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
    static void scale_queried(const float * x, float * y, const int ncols, const int nrows) {
        const int b = ggml_cuda_info().devices[0].nsm;
        scale<float><<<nrows, b>>>(x, y, ncols, nrows);
    }
    """)


def test_a_launch_becomes_size_expressions_over_the_host_parameters():
    first, second, third = find_launches(SRC, "scale<float>")
    assert first.host == "scale_cuda" and first.line == 12 and first.usable
    sizes = {"ncols": 1000, "nrows": 64}
    assert [evaluate(g, sizes) for g in first.grid] == [8, 16, 1]  # C's integer division
    assert [evaluate(b, sizes) for b in first.block] == [128, 1, 1]
    assert first.args[2:] == ["ncols", "nrows"]
    assert evaluate(first.shared_mem, sizes) == 2 * 128 * 4  # sizeof(float) is 4 bytes
    # C's `c ? a : b` over a host parameter is a size expression too
    assert second.usable and second.template_args == ["float"] and first.template_args is None
    assert [evaluate(b, {"device_sm": 9}) for b in second.block] == [256, 1, 1]
    assert [evaluate(b, {"device_sm": 8}) for b in second.block] == [64, 1, 1]
    assert second.args[2] == "ncols * 2"
    # a runtime query is not: the launch says why and is not used
    assert not third.usable and any("ggml_cuda_info" in p for p in third.problems)


HELPER_SRC = textwrap.dedent("""\
    #define WARP_SIZE 32
    struct launch_params {
        dim3 grid; dim3 block; size_t smem; cudaStream_t stream;
        launch_params(const dim3 & g, const dim3 & b, size_t s, cudaStream_t st)
            : grid(g), block(b), smem(s), stream(st) {}
    };
    template <typename Kernel, typename... Args>
    static void kernel_launch(Kernel kernel, const launch_params & p, Args&&... args) {
        kernel<<<p.grid, p.block, p.smem, p.stream>>>(args...);
    }
    template <int block_size, typename T>
    __global__ void norm(const T * x, T * y, const int ncols) { y[threadIdx.x] = x[ncols]; }
    template <typename T>
    static void norm_cuda(const T * x, T * y, const int ncols, const int nrows, cudaStream_t s) {
        if (ncols < 1024) {
            const dim3 block_dims(WARP_SIZE, 1, 1);
            norm<WARP_SIZE, T><<<nrows, block_dims, 0, s>>>(x, y, ncols);
        } else {
            const dim3 block_dims(1024, 1, 1);
            const launch_params lp = launch_params(
                (dim3)nrows, block_dims, block_dims.x > WARP_SIZE ? 32 * sizeof(float2) : 0, s);
            kernel_launch(norm<1024, T>, lp, x, y, ncols);
        }
    }
    """)


def test_launch_helpers_and_instantiations_are_read():
    """Issue 15: llama.cpp launches through ggml_cuda_kernel_launch(kernel<...>, params, ...),
    and norm_f32<1024> is launched with other blocks than norm_f32<32>."""
    small, big = find_launches(HELPER_SRC, "norm")
    assert small.template_args == ["32", None] and big.template_args == ["1024", None]
    assert big.usable and big.grid[0] == "nrows"
    assert [evaluate(b, {}) for b in big.block] == [1024, 1, 1]
    assert evaluate(big.shared_mem, {}) == 32 * 8  # block_dims.x > 32: sizeof(float2) bytes
    assert big.args[2] == "ncols"
    assert matches(big, ["1024", "float"]) and not matches(big, ["32"])
    assert matches(small, ["32", "half"])
    assert instantiations(HELPER_SRC, "norm") == ["norm<32, ?>", "norm<1024, ?>"]


def test_missing_template_arguments_come_from_the_host_launches():
    kernel, picked = resolve_kernel(HELPER_SRC, "norm", "norm.cu")
    assert kernel == "norm<32, float>"  # T: the host's own type parameter, float
    assert "norm<32, ?>; norm<1024, ?>" in picked[0]
    assert resolve_kernel(HELPER_SRC, "norm<1024>", "norm.cu")[0] == "norm<1024, float>"
    assert resolve_kernel(HELPER_SRC, "norm<64, half>", "norm.cu") == ("norm<64, half>", [])
    # block sizes a host computes at run time: nothing to take; the error lists what it saw
    src = HELPER_SRC.replace("if (ncols < 1024) {", "const int n = ncols / 4;\n        if (1) {")
    src = src.replace("norm<WARP_SIZE, T>", "norm<n, T>").replace("norm<1024, T>", "norm<n, T>")
    with pytest.raises(KportError, match=r"block_size, T of norm have no value; the host code "
                                         r"launches norm<\?, \?>; name the instantiation"):
        resolve_kernel(src, "norm", "norm.cu")
