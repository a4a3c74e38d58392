"""Launches read from the file's own host code (issue 15): `kernel<<<grid, block, smem>>>(...)`
as size expressions over the host function's parameters, locals and macros substituted."""

import textwrap

import pytest

from agent.case_guess import resolve_kernel
from agent.host_launch import find_launches, instantiations, matches
from runners.errors import KportError
from runners.sizeexpr import evaluate
from tests.cli import kport

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


TENSOR_HOST_SRC = textwrap.dedent("""\
    __global__ void gather(const float * col, float * dst, const int T_in, const int total) {
        const int i = threadIdx.x + blockIdx.x * blockDim.x;
        if (i < total) dst[i] = col[i % T_in];
    }
    void op_gather(context & ctx, tensor * dst) {
        const tensor * src0 = dst->src[0];
        const int T_in = (int) src0->ne[1];
        const int T_out = (int) dst->ne[0];
        const int OC = ((const int32_t *)(dst->op_params))[1];
        const int total = T_out * OC;
        const int num_blocks = (total + 255) / 256;
        gather<<<num_blocks, 256, 0, ctx.stream()>>>((const float *) src0->data,
                                                     (float *) dst->data, T_in, total);
    }
    """)


@pytest.mark.parametrize("sizes, values", [
    ({"T_in": 40, "total": 486}, {"T_in": 40, "total": 486}),
    # sizes naming the locals `total` is computed from: the launch is over those
    ({"T_in": 40, "T_out": 81, "OC": 6}, {"T_in": 40, "T_out": 81, "OC": 6}),
])
def test_a_size_the_user_gives_stands_for_the_host_local_of_that_name(sizes, values):
    # the host takes tensors (llama.cpp): no parameter says a size, but its locals do
    (unsized,) = find_launches(TENSOR_HOST_SRC, "gather")
    assert not unsized.usable
    (launch,) = find_launches(TENSOR_HOST_SRC, "gather", sizes=sizes)
    assert launch.usable, launch.problems
    total = 81 * 6 if "T_out" in values else values["total"]
    assert [evaluate(g, values) for g in launch.grid] == [-(-total // 256), 1, 1]
    assert evaluate(launch.args[2], values) == 40 and evaluate(launch.args[3], values) == total


QUERIED_SRC = textwrap.dedent("""\
    #define CUMSUM_BLOCK 256
    template <typename T>
    __global__ void scan(const T * src, T * dst, const long ne00, const long s01) {
        dst[blockIdx.x * s01 + threadIdx.x] = src[blockIdx.x * s01 + threadIdx.x];
    }
    template <typename T>
    static void scan_cuda(const T * src, T * dst, const long ne00, const long nrows,
                          const long nb01, const bool wide) {
        const auto & info = device_info().devices[current_device()];
        const int warp_size = info.warp_size;
        int block_size = ((ne00 + warp_size - 1) / warp_size) * warp_size;
        block_size = std::min(block_size, CUMSUM_BLOCK);
        int rows = nrows;
        if (wide) {
            rows = nrows / 2;
        }
        const size_t type_size = sizeof(T);
        scan<<<rows, block_size, block_size * type_size>>>(src, dst, ne00, nb01 / type_size);
    }
    """)


def test_reassigned_locals_queried_warp_sizes_and_deduced_types():
    (launch,) = find_launches(QUERIED_SRC, "scan<float>", given=["float"])
    sizes = {"ne00": 300, "nrows": 5, "nb01": 1200}
    # the reassignment that always runs before the launch is followed; a queried warp size
    # is CUDA's 32
    assert [evaluate(b, sizes) for b in launch.block] == [256, 1, 1]
    assert evaluate(launch.block[0], {**sizes, "ne00": 40}) == 64
    # the host's T is the kernel's (deduced from `const T * src`): sizeof(T) is 4 bytes
    assert evaluate(launch.args[3], sizes) == 300
    assert evaluate(launch.shared_mem, sizes) == 256 * 4
    # `rows` is assigned in a branch the launch may not take: the grid is not guessed
    assert launch.grid is None and not launch.usable
    assert any("rows" in p for p in launch.problems)


TORCH_EXT_SRC = textwrap.dedent("""\
    namespace ext {
    template <typename scalar_t, int VEC>
    __global__ void rows_kernel(scalar_t* out, const scalar_t* in, const int d) {
        const long t = blockIdx.x;
        for (long i = threadIdx.x; i < d; i += blockDim.x) out[t * d + i] = in[t * d + i];
    }
    namespace cfg { constexpr int kMaxBlock = 1024; }
    }  // namespace ext
    #define LAUNCH_ROWS(VEC)                                                  \\
      int d = input.size(-1);                                                 \\
      int64_t num_tokens = input.numel() / d;                                 \\
      dim3 grid(num_tokens);                                                  \\
      dim3 block(std::min<int64_t>(d, ext::cfg::kMaxBlock));                  \\
      EXT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "rows", [&] {          \\
        ext::rows_kernel<scalar_t, VEC><<<grid, block, 0, stream>>>(         \\
            out.data_ptr<scalar_t>(), input.data_ptr<scalar_t>(), d);          \\
      });
    void rows(torch::Tensor& out, torch::Tensor& input) {
      LAUNCH_ROWS(4);
    }
    """)


def test_a_torch_extension_launch_in_a_macro_through_a_namespace():
    """vLLM's style: the launch sits in a `#define` body used by the host function, the kernel
    is namespace-qualified, its type argument is the dispatch macro's `scalar_t`, and the block
    is clamped by `std::min<int64_t>` and a namespaced constexpr."""
    (launch,) = find_launches(TORCH_EXT_SRC, "rows_kernel<float, 4>", given=["float", "4"],
                              sizes={"d": 300, "num_tokens": 5})
    assert launch.host == "rows" and launch.usable, launch.problems
    assert launch.template_args == [None, "4"]
    at = {"d": 300, "num_tokens": 5}
    assert [evaluate(g, at) for g in launch.grid] == [5, 1, 1]
    assert [evaluate(b, at) for b in launch.block] == [300, 1, 1]
    assert evaluate(launch.block[0], {"d": 3000, "num_tokens": 5}) == 1024
    # a launch of another instantiation does not match this one
    (other,) = find_launches(TORCH_EXT_SRC.replace("VEC><<<", "8><<<"), "rows_kernel")
    assert not matches(other, ["float", "4"])


def test_a_ternary_inside_parentheses_keeps_its_condition_whole():
    src = textwrap.dedent("""\
        __global__ void k(float* y, int n) { y[threadIdx.x] = n; }
        void launch(float* y, int channels) {
          const int per = 16 / sizeof(float);
          const int threads = ((channels + per - 1) / per) >= 1024 ? 1024
                              : ((channels + per - 1) / per);
          k<<<1, threads>>>(y, channels);
        }
        """)
    (launch,) = find_launches(src, "k")
    assert launch.usable, launch.problems
    assert evaluate(launch.block[0], {"channels": 64}) == 16
    assert evaluate(launch.block[0], {"channels": 100000}) == 1024


def test_no_guessed_launch_for_a_kernel_with_no_flat_thread_index(tmp_path):
    """A row per block, launched from a host function kport cannot read: one thread per
    element is not its launch (vLLM's rms_norm once came out ACCEPTED so, valid at the given
    sizes only; llama.cpp's fwht returned 288 elements for any size). Now no port, and the
    reason names the unreadable launch and what to pass."""
    path = tmp_path / "rows.cu"
    path.write_text(textwrap.dedent("""\
        __global__ void rows(const float* x, float* y, const int ncols) {
            const int row = blockIdx.x;
            for (int c = threadIdx.x; c < ncols; c += blockDim.x)
                y[row * ncols + c] = 2.0f * x[row * ncols + c];
        }
        void launch(const Tensor& x, Tensor& y) {
            const int ncols = x.size(1), nrows = x.size(0);
            rows<<<nrows, query_block_size()>>>(x.data(), y.data(), ncols);
        }
        """))
    proc = kport("port", str(path), "--kernel", "rows", "--offline", "--no-kb",
                 "--out", str(tmp_path / "pkg"), "--size", "ncols=300", "--size", "nrows=5")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "ACCEPTED" not in out and "Traceback" not in out, out
    assert "no flat thread index" in out and "rows.cu:8" in out
    assert "could not be read" in out and "query_block_size" in out and "--grid" in out


def test_a_template_argument_kport_cannot_fold_matches_any_value():
    """llama.cpp's ssm_conv: `constexpr int kNC = decltype(NC)::value;` inside a dispatch
    lambda is a value kport cannot fold, so the launch is one of any kNC, not of none."""
    src = textwrap.dedent("""\
        template <bool silu, int threads, int nc>
        __global__ void conv(const float* x, float* y, int n) { y[threadIdx.x] = x[threadIdx.x]; }
        template <bool silu>
        static void conv_cuda(const float* x, float* y, int n, int nc, int n_s) {
            const int threads = 128;
            auto launch = [&](auto NC) {
                constexpr int kNC = decltype(NC)::value;
                conv<silu, threads, kNC><<<n_s, threads>>>(x, y, n);
            };
            switch (nc) { case 4: launch(std::integral_constant<int, 4>{}); break; }
        }
        """)
    (launch,) = find_launches(src, "conv<true, 128, 4>", given=["true", "128", "4"],
                              sizes={"n": 64, "n_s": 3})
    assert launch.template_args == [None, "128", None] and matches(launch, ["true", "128", "4"])
    assert not matches(launch, ["true", "64", "4"])
