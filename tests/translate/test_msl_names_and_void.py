"""Real kernels' names and pointer types the port must change (issue 15): a CUDA name that
is an MSL keyword or one MLX's signature declares (llama.cpp's conv2d_dw has a parameter
`kernel`) is renamed in the port while run() and the case keep it; a `void *` parameter read
through casts (pad_reflect_1d's `(const float *) ((const char *) src0 + i*nb01)`) is an array
of the cast's type, addressed in bytes."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

from agent.translate import TranslateError, translate_kernel
from corpus.cases import MetalSpec
from runners.metal_sim.allowlist import KEYWORDS
from tests.cli import kport, load_package

NAMES_SRC = textwrap.dedent("""\
    #include <cuda_fp16.h>
    struct device { float thread; };
    __device__ float twice(float half) { return 2.0f * half; }
    __global__ void smooth(const float * x, const float * kernel, float * device_out_buf,
                           float * vertex, const int n, const int k) {
        const int grid_size = blockIdx.x * blockDim.x + threadIdx.x;
        if (grid_size >= n) return;
        struct device d;
        d.thread = 0.0f;
        for (int j = 0; j < k; ++j) {
            d.thread += x[grid_size + j] * kernel[j];
        }
        const half h = __float2half(d.thread);
        device_out_buf[grid_size] = twice(__half2float(h) * 0.5f);
        vertex[grid_size] = vertex[grid_size] + 1.0f;
    }
    """)


def _identifiers(metal: str) -> set[str]:
    text = re.sub(r"\[\[[^\]]*\]\]", " ", metal)  # attributes are no names
    return set(re.findall(r"[A-Za-z_]\w*", text))


def test_msl_words_are_renamed_in_the_port_and_kept_in_its_interface():
    tr = translate_kernel(NAMES_SRC, "smooth", grid=["ceil_div(n, 64)"], block=[64])
    assert tr.inputs == ["x", "kernel", "vertex", "n", "k"]
    assert tr.outputs == ["device_out_buf", "vertex_out"]
    assert tr.roles["kernel"] == "in" and tr.roles["vertex"] == "inout"
    assert tr.names == {"kernel": "kernel_kp", "vertex": "vertex_kp",
                        "vertex_out": "vertex_kp_out"}
    metal = tr.header + tr.body
    # no user name that is an MSL word or an MLX attribute parameter is left
    for word in ("kernel", "vertex", "device", "thread", "grid_size"):
        assert word not in _identifiers(metal), (word, metal)
    assert "half_kp" in tr.header  # twice's parameter `half` ...
    assert re.search(r"\bhalf h\b", tr.body)  # ... but CUDA's type half stays the type
    assert "kernel_kp[j]" in tr.body and "d.thread_kp +=" in tr.body


def test_a_port_with_a_parameter_named_kernel_runs_as_the_cuda_names_it(tmp_path):
    (tmp_path / "smooth.cu").write_text(NAMES_SRC)
    out = tmp_path / "pkg"
    proc = kport("port", str(tmp_path / "smooth.cu"), "--kernel", "smooth", "--offline",
                 "--no-kb", "--size", "n=200", "--size", "k=3", "--grid", "ceil_div(n, 64)",
                 "--block", "64", "--shape", "x=n + k", "--shape", "kernel=k", "--shape",
                 "device_out_buf=n", "--shape", "vertex=n", "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    module = load_package(out, "msl_names")
    assert module.SPEC["names"] == {"kernel": "kernel_kp", "vertex": "vertex_kp",
                                    "vertex_out": "vertex_kp_out"}
    rng = np.random.default_rng(1)
    n, k = 77, 5  # sizes the port never saw
    x = rng.standard_normal(n + k).astype(np.float32)
    w = rng.standard_normal(k).astype(np.float32)
    v = rng.standard_normal(n).astype(np.float32)
    got = module.run(x=x, kernel=w, vertex=v, n=n, k=k)
    want = np.array([x[i:i + k] @ w for i in range(n)], np.float32)
    np.testing.assert_allclose(np.array(got["device_out_buf"]), want, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(np.array(got["vertex"]), v + 1, rtol=1e-6)


def test_a_case_names_only_its_own_arguments_anew():
    base = {"source": "port.metal", "inputs": ["kernel"], "outputs": ["y"], "grid": [1],
            "threadgroup": [1]}
    assert MetalSpec(**base, names={"kernel": "kernel_kp"}).names == {"kernel": "kernel_kp"}
    with pytest.raises(ValueError, match="names: 'w' is no input or output"):
        MetalSpec(**base, names={"w": "w_kp"})
    assert "kernel" in KEYWORDS  # what metal_sim refuses as a buffer name


VOID_SRC = textwrap.dedent("""\
    #include <cstdint>
    __global__ void row_reverse(const void * __restrict__ src0, void * __restrict__ dst,
                                const int64_t ne00, const int64_t nb00, const int64_t nb01,
                                const int64_t nb0, const int64_t nb1) {
        const int64_t i1 = blockIdx.y;
        const int64_t i0 = blockIdx.x * blockDim.x + threadIdx.x;
        if (i0 >= ne00) return;
        const char * row = (const char *) src0 + i1 * nb01;
        char * out_row = (char *) dst + i1 * nb1;
        const float v = *(const float *) (row + (ne00 - 1 - i0) * nb00);
        *(float *) (out_row + i0 * nb0) = 2.0f * v;
    }
    """)


def test_a_void_parameter_read_through_casts_is_an_array_of_their_type(tmp_path):
    tr = translate_kernel(VOID_SRC, "row_reverse", grid=["ceil_div(ne00, 32)", "nrows"],
                          block=[32])
    assert tr.dtypes["src0"] == "float" and tr.dtypes["dst"] == "float"
    assert tr.roles == {"src0": "in", "dst": "out", "ne00": "scalar", "nb00": "scalar",
                        "nb01": "scalar", "nb0": "scalar", "nb1": "scalar"}
    # the byte arithmetic stays: a device char pointer, its sum cast to device float
    assert "(const device char *) src0 + i1 * nb01" in tr.body
    assert "*(const device float *) (row + (ne00 - 1 - i0) * nb00)" in tr.body
    (tmp_path / "rev.cu").write_text(VOID_SRC)
    out = tmp_path / "pkg"
    proc = kport("port", str(tmp_path / "rev.cu"), "--kernel", "row_reverse", "--offline",
                 "--no-kb", "--size", "ne00=40", "--size", "nrows=3", "--size", "nb00=4",
                 "--size", "nb01=160", "--size", "nb0=4", "--size", "nb1=160",
                 "--grid", "ceil_div(ne00, 32), nrows", "--block", "32",
                 "--shape", "src0=ne00 * nrows", "--shape", "dst=ne00 * nrows",
                 "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    module = load_package(out, "void_rows")
    assert module.SPEC["args"]["src0"]["dtype"] == "float32"
    ne00, nrows = 13, 5  # held out
    x = np.random.default_rng(2).standard_normal(ne00 * nrows).astype(np.float32)
    got = module.run(src0=x, ne00=ne00, nrows=nrows, nb00=4, nb01=4 * ne00, nb0=4,
                     nb1=4 * ne00)
    want = 2 * x.reshape(nrows, ne00)[:, ::-1]
    np.testing.assert_allclose(np.array(got["dst"]).reshape(nrows, ne00), want, rtol=1e-6)


HANDED_ON = ("__device__ float load(const void * q) {{ return *(const float *) q; }}\n"
             "__global__ void k(const void * p, float * y) {{\n"
             "    if (p == nullptr) return;\n"
             "    {use}\n}}\n")


def test_casts_to_two_element_types_are_a_clear_error():
    use = "const float a = *(const float *) p; const int b = ((const int *) p)[1]; y[0] = a + b;"
    with pytest.raises(TranslateError, match=r"^rev\.cu:4: void \* parameter 'p' is read as "
                                             r"float and as int"):
        translate_kernel(HANDED_ON.format(use=use), "k", where="rev.cu")


def test_a_void_parameter_handed_on_uncast_says_where_and_asks_for_a_case(tmp_path):
    src = HANDED_ON.format(use="y[threadIdx.x] = load(p);")
    tr = translate_kernel(src, "k", where="rev.cu")
    assert tr.dtypes["p"] == "void"
    assert "p: a void * handed uncast to a function at rev.cu:4, so its element type is not " \
        "known" in tr.notes
    (tmp_path / "rev.cu").write_text(src)
    proc = kport("port", str(tmp_path / "rev.cu"), "--kernel", "k", "--offline", "--no-kb",
                 "--out", str(tmp_path / "pkg"))
    assert proc.returncode != 0 and "Traceback" not in proc.stdout + proc.stderr
    assert "cannot guess the element type of argument 'p' ('void'): a void * handed uncast " \
        "to a function at rev.cu:4" in proc.stdout + proc.stderr
