"""The gaps causal-conv1d's forward kernel and mamba's selective scan met (issue 16), each in
small: rows read whole without their innermost stride, pointers walked along a row, CUB's
Store as the only write of an output, casts of local arrays and of read-only inputs, max of
a braced list in a constant expression, and a pointer field read as a CUDA vector. Each port
runs in both simulators (tests/translate/test_translate.py ``run_both``)."""

from __future__ import annotations

import textwrap

import numpy as np

from agent.translate import translate_kernel
from agent.translate.init_lists import fold
from tests.cli import kport
from tests.translate.test_translate import run_both

ROWS = textwrap.dedent("""\
    #include <cstdint>
    struct RowParams {
        int batch, dim, len;
        uint32_t x_batch_stride, x_c_stride, x_l_stride;
        uint32_t out_batch_stride, out_c_stride, out_l_stride;
        void *__restrict__ x_ptr;
        void *__restrict__ out_ptr;
    };
    __global__ void rows_whole(RowParams params) {
        // a block reads its row in chunks of 32, never through x_l_stride
        float *x = reinterpret_cast<float *>(params.x_ptr) + blockIdx.x * params.x_batch_stride
            + blockIdx.y * params.x_c_stride;
        float *out = reinterpret_cast<float *>(params.out_ptr)
            + blockIdx.x * params.out_batch_stride + blockIdx.y * params.out_c_stride;
        for (int chunk = 0; chunk * 32 < params.len; ++chunk) {
            if (chunk * 32 + threadIdx.x < params.len) {
                out[threadIdx.x] = 2.0f * x[threadIdx.x] + 1.0f;
            }
            x += 32;
            out += 32;
        }
    }
    """)


def test_rows_read_whole_get_contiguous_strides_and_a_walked_pointer_is_read_only(tmp_path):
    """The stride probe measured x_batch_stride as (dim - 1 + len) * len (the row read whole
    counted into the channel's extent), and ``x += 32`` made x read-and-written (inout)."""
    path = tmp_path / "rows.cu"
    path.write_text(ROWS)
    out = tmp_path / "pkg"
    proc = kport("port", str(path), "--kernel", "rows_whole", "--offline", "--no-kb",
                 "--size", "batch=2", "--size", "dim=3", "--size", "len=70",
                 "--grid", "batch, dim", "--block", "32", "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    case = (out / "case.guessed.toml").read_text()
    assert '{ name = "x_batch_stride", dtype = "uint32", value = "dim * len" }' in case
    assert '{ name = "x_c_stride", dtype = "uint32", value = "len" }' in case
    assert 'name = "params_x_ptr"\nrole = "in"' in case
    assert 'name = "params_out_ptr"\nrole = "out"' in case


STORE_ONLY = """
#include <cub/cub.cuh>
template <int BLOCK> struct Traits {
  using StoreT = cub::BlockStore<float, BLOCK, 2, cub::BLOCK_STORE_DIRECT>;
  using LoadT = cub::BlockLoad<float, BLOCK, 2, cub::BLOCK_LOAD_DIRECT>;
};
template <typename K>
__global__ void k(float* x, float* y, int n) {
  __shared__ typename K::StoreT::TempStorage s;
  __shared__ typename K::LoadT::TempStorage l;
  float *src = x + blockIdx.x * 64;
  float *dst = y + blockIdx.x * 64;
  float items[2];
  typename K::LoadT(l).Load(src, items, n);
  items[0] *= 3.0f; items[1] += 1.0f;
  typename K::StoreT(s).Store(reinterpret_cast<float *>(dst), items, n);
}
"""


def test_cub_store_through_a_view_is_the_output_and_load_only_reads():
    """``typename K::StoreT(s).Store(dst, ...)`` parses as a broken declaration: its write
    of y went unseen (no outputs), and x, never written, must stay an input."""
    x = np.arange(128, dtype=np.float32)
    tr, want, got = run_both(STORE_ONLY, "k<Traits<32>>", {"x": x, "n": np.int32(64)},
                             {"y": np.zeros(128, np.float32)}, ["2"], [32])
    assert tr.roles["x"] == "in" and tr.roles["y"] == "out"
    np.testing.assert_array_equal(got["y"], want["y"])


CASTS = """
struct Chunk { float v[4]; };
__global__ void k(const float *x, float *y, int n) {
  const int t = threadIdx.x;
  const float *row = x + 8 * t;
  float zeros[4] = {0};
  float vals[8];
  reinterpret_cast<Chunk *>(vals)[0] = reinterpret_cast<Chunk *>(zeros)[0];
  (*reinterpret_cast<Chunk (*)[1]>(&vals[4]))[0] =
      (*reinterpret_cast<const Chunk (*)[1]>(row + 4))[0];
  float *tail = vals + 6;
  reinterpret_cast<Chunk (&)[1]>(zeros)[0].v[1] +=
      tail[1] + reinterpret_cast<const Chunk *>(row)[0].v[2];
  float s = 0.0f;
  for (int i = 0; i < 8; ++i) s += vals[i] * (i + 1);
  y[t] = s + zeros[1];
}
"""


def test_casts_of_local_arrays_are_thread_and_casts_of_an_input_view_keep_const():
    x = np.random.default_rng(0).integers(-8, 9, 8 * 32).astype(np.float32)
    tr, want, got = run_both(CASTS, "k", {"x": x, "n": np.int32(0)},
                             {"y": np.zeros(32, np.float32)}, ["1"], [32])
    np.testing.assert_array_equal(got["y"], want["y"])
    for cast in ("reinterpret_cast<thread Chunk *>(vals)", "reinterpret_cast<thread Chunk *>"
                 "(zeros)", "reinterpret_cast<thread Chunk (*)[1]>(&vals[4])",
                 "thread float *tail", "reinterpret_cast<thread Chunk (&)[1]>(zeros)",
                 "reinterpret_cast<const device Chunk *>(row)"):
        assert cast in tr.body, cast


MAX_LIST = """
#include <algorithm>
#include <initializer_list>
constexpr size_t custom_max(std::initializer_list<size_t> ilist) { return std::max(ilist); }
template <int A, int B> struct Sizes {
  static constexpr int kSmem = custom_max({sizeof(float) * A, sizeof(int) * B, 8});
  static constexpr int kLeast = std::min({A, B, 100});
};
__global__ void k(const float *x, float *y, int n) {
  using S = Sizes<5, 9>;
  __shared__ float tile[S::kSmem / sizeof(float)];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = tile[S::kSmem / sizeof(float) - 1 - threadIdx.x] + S::kLeast;
}
"""


def test_max_and_min_of_a_braced_list_fold_into_constant_expressions():
    """MSL has no std::initializer_list: causal-conv1d's custom_max({...}) sizing shared
    memory in a static constexpr member is folded, as std::max({...}) and std::min({...})."""
    x = np.arange(9, dtype=np.float32)
    tr, want, got = run_both(MAX_LIST, "k", {"x": x, "n": np.int32(0)},
                             {"y": np.zeros(9, np.float32)}, ["1"], [9])
    np.testing.assert_array_equal(got["y"], want["y"])
    assert "initializer_list" not in tr.header + tr.body and not tr.todos
    # b only when a < b: the first of equal largest, as std::max chooses; lines kept
    assert fold("int m = std::max({a,\n b});") == "int m = ((a) < (b) ? (b) : (a))\n;"


VECTOR_FIELD = textwrap.dedent("""\
    #include <type_traits>
    struct ScanParams {
        int n;
        void *__restrict__ x_ptr;
        void *__restrict__ u_ptr;
    };
    template <bool kIsComplex_> struct Traits {
        static constexpr bool kIsComplex = kIsComplex_;
        using scan_t = std::conditional_t<!kIsComplex, float2, float4>;
    };
    template <typename Ktraits>
    __global__ void k(ScanParams params) {
        using scan_t = typename Ktraits::scan_t;
        const float *u = reinterpret_cast<float *>(params.u_ptr);
        scan_t *x = reinterpret_cast<scan_t *>(params.x_ptr);
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < params.n) { x[i] = make_float2(u[i], 2.0f * u[i]); }
    }
    """)


def test_a_pointer_field_read_as_a_cuda_vector_is_a_buffer_of_its_scalars():
    """mamba's ``scan_t *x = reinterpret_cast<scan_t *>(params.x_ptr)`` (scan_t a
    std::conditional_t of float2 and float4): the field flattens to a float buffer, and the
    view keeps its cast."""
    tr = translate_kernel(VECTOR_FIELD, "k<Traits<false>>")
    assert tr.flat == {"params_u_ptr": "params.u_ptr", "params_x_ptr": "params.x_ptr"}
    assert tr.dtypes["params_x_ptr"] == "float" and tr.roles["params_x_ptr"] == "out"
    assert "reinterpret_cast<device scan_t *>(params_x_ptr)" in tr.body
