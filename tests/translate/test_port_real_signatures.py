"""`kport port` on signatures real kernels have (issue 15): size_t and enum scalars, an output
folder whose name is no identifier, shapes measured rather than guessed, and a package whose
run() takes a longer input buffer than the kernel reads (a view's first elements)."""

from __future__ import annotations

import importlib.util
import json
import textwrap

import numpy as np
import pytest

from tests.cli import kport

SRC = textwrap.dedent("""\
    #include <cstddef>
    enum pad_mode { PAD_ZERO, PAD_EDGE };
    #define BLOCK 64
    __global__ void pad_rows(const float * src, float * dst, const size_t ncols,
                             const int lp, const enum pad_mode mode) {
        const int row = blockIdx.y;
        const int c = blockIdx.x * blockDim.x + threadIdx.x;
        const int width = ncols + 2 * lp;
        if (c >= width) return;
        int s = c - lp;
        float v;
        if (s < 0 || s >= (int) ncols) {
            v = mode == PAD_EDGE ? src[row * ncols + (s < 0 ? 0 : ncols - 1)] : 0.0f;
        } else {
            v = src[row * ncols + s];
        }
        dst[row * width + c] = v;
    }
    static void pad_rows_cuda(const float * src, float * dst, const size_t ncols,
                              const int nrows, const int lp, cudaStream_t stream) {
        const dim3 grid((ncols + 2 * lp + BLOCK - 1) / BLOCK, nrows, 1);
        pad_rows<<<grid, BLOCK, 0, stream>>>(src, dst, ncols, lp, PAD_EDGE);
    }
    """)


def test_size_t_and_enum_scalars_port_with_measured_shapes(tmp_path):
    path = tmp_path / "pad.cu"
    path.write_text(SRC)
    out = tmp_path / "my-port"  # a case id, not an identifier: the kernel name is made one
    proc = kport("port", str(path), "--kernel", "pad_rows", "--offline", "--no-kb",
                 "--size", "ncols=100", "--size", "nrows=3", "--size", "lp=5",
                 "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads((out / "report.json").read_text())
    assert any("shape of dst: [" in g and "measured in cuda_sim" in g for g in rep["guessed"])
    spec = importlib.util.spec_from_file_location("kport_pad_port", out / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.SPEC["args"]["ncols"]["dtype"] == "uint64"
    assert module.SPEC["args"]["mode"]["dtype"] == "int32"
    x = np.random.default_rng(0).standard_normal(4 * 30 + 17).astype(np.float32)
    got = module.run(src=x, ncols=30, nrows=4, lp=2, mode=1)  # a longer buffer is fine
    rows = x[:120].reshape(4, 30)
    want = np.concatenate([rows[:, :1], rows[:, :1], rows, rows[:, -1:], rows[:, -1:]], 1)
    np.testing.assert_array_equal(module.as_numpy("dst", got["dst"]).reshape(4, 34), want)


STRUCT_SRC = textwrap.dedent("""\
    #include <cstdint>
    struct inner { float bias[2]; };
    struct row_params {
        int64_t ncols;
        int64_t nrows;
        float scale;
        inner in;
        bool negate;
    };
    #define BLOCK 128
    __global__ void scale_rows(const float * x, float * dst, const row_params p) {
        const int64_t row = blockIdx.x;
        for (int64_t c = threadIdx.x; c < p.ncols; c += blockDim.x) {
            const float v = x[row * p.ncols + c] * p.scale + p.in.bias[row % 2];
            dst[row * p.ncols + c] = p.negate ? -v : v;
        }
    }
    static void scale_rows_cuda(const float * x, float * dst, const row_params & p,
                                const int nrows) {
        scale_rows<<<nrows, BLOCK>>>(x, dst, p);
    }
    """)


def test_a_struct_parameter_travels_as_its_bytes_and_run_takes_a_dict(tmp_path):
    """Issue 15 item 4: a parameters struct by value (llama.cpp's soft_max_params): the port
    reads its bytes back as the struct; run() takes a dict of fields (nested dicts, lists for
    arrays), and a field named like a size gives that size."""
    path = tmp_path / "rows.cu"
    path.write_text(STRUCT_SRC)
    out = tmp_path / "pkg"
    proc = kport("port", str(path), "--kernel", "scale_rows", "--offline", "--no-kb",
                 "--size", "nrows=5", "--size", "ncols=300", "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    assert "reinterpret_cast<const device row_params*>(p)" in (out / "kernel.metal").read_text()
    spec = importlib.util.spec_from_file_location("kport_rows_port", out / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.SPEC["size_args"] == {}  # the struct's fields give nrows and ncols
    x = np.arange(3 * 7, dtype=np.float32)
    got = module.run(x=x, p={"ncols": 7, "nrows": 3, "scale": 2.0,
                             "in": {"bias": [1.0, -1.0]}, "negate": True})
    want = -(x.reshape(3, 7) * 2 + np.array([1.0, -1.0, 1.0])[:, None])
    np.testing.assert_array_equal(module.as_numpy("dst", got["dst"]).reshape(3, 7), want)
    with pytest.raises(ValueError, match=r"p: ncolz: no such field"):
        module.run(x=x, p={"ncolz": 7, "nrows": 3})


NULLABLE_SRC = textwrap.dedent("""\
    #define BLOCK 64
    __global__ void add_bias(const float * x, const float * bias, float * y, const int n) {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        y[i] = x[i] + (bias != nullptr ? bias[i] : 1.0f);
    }
    static void add_bias_cuda(const float * x, float * y, const int n) {
        add_bias<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, nullptr, y, n);
    }
    """)


def test_an_optional_input_may_be_null_in_the_oracle_and_none_in_run(tmp_path):
    """Issue 15 item 4: a pointer the kernel tests against nullptr (llama.cpp's softmax mask,
    PyTorch's optional tensors). The host launch passes nullptr, so the case does; the port
    takes an array and the template flag KP_HAS_bias, and run() takes bias=None or an array."""
    path = tmp_path / "bias.cu"
    path.write_text(NULLABLE_SRC)
    out = tmp_path / "pkg"
    proc = kport("port", str(path), "--kernel", "add_bias", "--offline", "--no-kb",
                 "--size", "n=300", "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads((out / "report.json").read_text())
    assert any(g.startswith("bias: null, as the host launch passes it") for g in rep["guessed"])
    spec = importlib.util.spec_from_file_location("kport_bias_port", out / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(module.as_numpy("y", module.run(x=x, n=10)["y"]), x + 1)
    bias = np.full(10, 5, np.float32)
    np.testing.assert_array_equal(module.as_numpy("y", module.run(x=x, bias=bias, n=10)["y"]),
                                  x + 5)
