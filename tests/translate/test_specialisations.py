"""The closure keeps only the specialisations and overloads of a called function that the
kernel's instantiation can use (issue 15, DeepSpeed's `conversion::to`: its double
specialisations carry a PTX typo cuda_sim refuses and call `__ll2double_rn`, which Metal cannot
have; no real build instantiates them). Where kport cannot tell the types, it keeps them all."""

from __future__ import annotations

import textwrap

import numpy as np

from agent.translate import cuda_closure
from tests.cli import kport, load_package

CONVERT = """\
    #include <cuda_fp16.h>
    #define DS_D_INLINE __device__ __forceinline__
    namespace conversion {
    template <typename TO, typename FROM>
    DS_D_INLINE TO to(FROM val)
    {
        return to(val);
    }
    template <>
    DS_D_INLINE float to(float val)
    {
        return val;
    }
    template <>
    DS_D_INLINE double to(float val)
    {
        double ret_val;
        asm("ctv.rn.f64.f32 %0, %1;\\n" : "=d"(ret_val) : "f"(val));
        return ret_val;
    }
    template <>
    DS_D_INLINE double to(int64_t val)
    {
        return __ll2double_rn(val);
    }
    template <>
    DS_D_INLINE float to(__half val)
    {
        return __half2float(val);
    }
    template <>
    DS_D_INLINE __half to(float val)
    {
        return __float2half(val);
    }
    }  // namespace conversion

    template <typename T>
    __global__ void scale_add(T* out, const T* a, const T* b, float gamma, int n)
    {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        T buf[2];
        buf[0] = a[i < n ? i : 0];
        buf[1] = b[i < n ? i : 0];
        float up_a = conversion::to<float>(buf[0]);
        float up_b = conversion::to<float>(buf[1]);
        if (i < n) out[i] = conversion::to<T>((gamma * up_a) + up_b);
    }
    """


def _heads(code: str) -> list[str]:
    """The `R to(A val)` heads of the conversion functions in ``code``."""
    return [" ".join(line.split()[1:]) for line in code.splitlines()
            if line.startswith("__device__") and " to(" in line]


def test_only_the_specialisations_the_instantiation_calls_are_kept(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(CONVERT))
    proc = kport("port", str(path), "--kernel", "scale_add<float>", "--offline", "--no-kb",
                 "--out", str(tmp_path / "pkg"), "--size", "n=300")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    cuda = next((tmp_path / "pkg").glob("*.device.cu")).read_text()
    metal = (tmp_path / "pkg" / "kernel.metal").read_text()
    assert _heads(cuda) == ["TO to(FROM val)", "float to(float val)"]
    assert "ctv" not in cuda and "__ll2double_rn" not in metal and "double" not in metal
    a, b = np.linspace(-1, 1, 50, dtype=np.float32), np.linspace(0, 3, 50, dtype=np.float32)
    out = load_package(tmp_path / "pkg", "spec_float").run(a=a, b=b, gamma=0.5, n=50)["out"]
    np.testing.assert_allclose(np.asarray(out), 0.5 * a + b, rtol=1e-6)
    # T = __half: buf is __half[], so to<float>(__half) and to<__half>(float)
    half = cuda_closure(textwrap.dedent(CONVERT), "scale_add<__half>")
    assert _heads(half) == ["TO to(FROM val)", "float to(__half val)", "__half to(float val)"]


def test_types_kport_cannot_tell_keep_every_specialisation():
    """A use whose types are unknown (a field of a struct, a function pointer, a call in a
    macro's body, a template parameter of a helper) may name any specialisation."""
    src = textwrap.dedent(CONVERT)
    every = src.count("DS_D_INLINE") - 1  # the primary and its five specialisations
    field = src.replace("T buf[2];", "struct { T x; } buf[2];").replace(
        "buf[0] = a", "buf[0].x = a").replace("buf[1] = b", "buf[1].x = b").replace(
        "to<float>(buf[0])", "to<float>(buf[0].x)")
    pointer = src.replace("float up_b = conversion::to<float>(buf[1]);",
                          "float (*f)(float) = conversion::to<float, float>;\n"
                          "    float up_b = f(buf[1]);")
    macro = src.replace("namespace conversion {", "#define UP(x) conversion::to<float>(x)\n"
                        "namespace conversion {").replace("conversion::to<float>(buf[1])",
                                                          "UP(buf[1])")
    helper = src.replace("template <typename T>\n__global__", "template <typename U>\n"
                         "__device__ float up(U v) { return conversion::to<float>(v); }\n"
                         "template <typename T>\n__global__").replace(
        "conversion::to<float>(buf[1])", "up(buf[1])")
    for variant in (field, pointer, macro, helper):
        assert len(_heads(cuda_closure(variant, "scale_add<float>"))) == every, variant


def test_the_primary_template_body_counts_where_it_is_instantiated():
    """`to<float>(int)` has no specialisation: the primary is instantiated, and what its
    body calls (`to<TO>(float(val))`, so `float to(float)`) is kept."""
    src = textwrap.dedent(CONVERT).replace("return to(val);", "return to<TO>(float(val));")
    src = src.replace("float up_b = conversion::to<float>(buf[1]);",
                      "float up_b = conversion::to<float>(n);")
    assert _heads(cuda_closure(src, "scale_add<__half>")) == [
        "TO to(FROM val)", "float to(float val)", "float to(__half val)", "__half to(float val)"]


OVERLOADS = """\
    __device__ inline float widen(float x) { return x; }
    __device__ inline double widen(long long x) { return __ll2double_rn(x); }

    __global__ void twice(float* out, const float* a, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = widen(a[i]) * 2.0f;
    }
    """


def test_an_overload_no_call_matches_exactly_is_left_out(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(OVERLOADS))
    proc = kport("port", str(path), "--kernel", "twice", "--offline", "--no-kb",
                 "--out", str(tmp_path / "pkg"), "--size", "n=300")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    assert "__ll2double_rn" not in (tmp_path / "pkg" / "kernel.metal").read_text()
    # an int argument matches neither exactly: a conversion picks one, both are kept
    ints = textwrap.dedent(OVERLOADS).replace("widen(a[i])", "widen(i)")
    assert "__ll2double_rn" in cuda_closure(ints, "twice")
