"""What the device-code closure keeps of real trees (issue 15, kernels of vLLM and DeepSpeed):
the namespaces around what it keeps, the one overload of a kernel name an instantiation
selects, no specialisation for a type of a host header read as empty, functions marked
device code through a macro, and no file-scope macro use read as a declaration. Each port is
checked against the CUDA kernel in cuda_sim."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from agent.translate import TranslateError, cuda_closure, translate_kernel
from tests.cli import kport, load_package


def _port(tmp_path, src: str, kernel: str, *flags: str):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(src))
    return kport("port", str(path), "--kernel", kernel, "--offline", "--no-kb",
                 "--out", str(tmp_path / "pkg"), *flags)


NAMESPACED = """\
    #include <torch/all.h>
    namespace tiles {
    constexpr int kWidth = 4;
    namespace detail {
    __device__ __forceinline__ float twice(float x) { return 2.0f * x; }
    }  // namespace detail
    }  // namespace tiles
    namespace ops::modes {
    enum class Mode { kPlain = 0, kScaled = 1 };
    }
    namespace ops {
    using namespace tiles;
    namespace dt = tiles::detail;
    template <typename T, modes::Mode mode>
    __global__ void scale_kernel(T* __restrict__ out, const T* __restrict__ src, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) {
        float v = (float)src[i];
        if constexpr (mode == modes::Mode::kScaled) v = dt::twice(v) * kWidth;
        out[i] = (T)v;
      }
    }
    }  // namespace ops
    void scale(torch::Tensor& out) {}
    """


def test_namespaces_stay_around_what_the_closure_keeps(tmp_path):
    """`pwise::granularity`, `vllm::Fp8KVCacheDataType`: the closure had dropped the
    namespaces, so qualified names were unknown in the CUDA slice and in the port."""
    proc = _port(tmp_path, NAMESPACED, "scale_kernel<float, ops::modes::Mode::kScaled>",
                 "--size", "n=300")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    cuda = next((tmp_path / "pkg").glob("*.device.cu")).read_text()
    metal = (tmp_path / "pkg" / "kernel.metal").read_text()
    for code in (cuda, metal):
        assert "namespace tiles {" in code and "namespace ops::modes {" in code
        assert "using namespace ops;" in code  # the kernel's own, for code at file scope
    x = np.linspace(-1, 1, 50, dtype=np.float32)
    out = load_package(tmp_path / "pkg", "closure_namespaces").run(src=x, n=50)["out"]
    np.testing.assert_allclose(np.asarray(out), 8 * x, rtol=1e-6)  # the kScaled branch


OVERLOADED = """\
    #include <torch/all.h>
    #include <type_traits>
    namespace norms {
    template <typename scalar_t>
    struct Packed {
      static constexpr bool fast = false;
    };
    __device__ inline float widen(float x) { return x; }

    template <typename scalar_t, int lanes>
    __global__ std::enable_if_t<(lanes > 0) && Packed<scalar_t>::fast>
    add_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ a, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = a[i] + lanes;
    }

    template <typename scalar_t, int lanes>
    __global__ std::enable_if_t<(lanes == 0) || !Packed<scalar_t>::fast>
    add_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ a, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = widen(a[i]) * 2.0f;
    }
    }  // namespace norms
    """


def test_the_overload_the_instantiation_selects_is_the_one_kept(tmp_path):
    """vLLM's fused_add_rms_norm_kernel: two definitions told apart by enable_if over
    `width`; the closure kept the first, which `<float, 0>` does not select (cuda_sim: no
    matching function)."""
    proc = _port(tmp_path, OVERLOADED, "add_kernel<float, 0>", "--size", "n=300")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    out = load_package(tmp_path / "pkg", "closure_overloads").run(a=a, n=64)["out"]
    np.testing.assert_allclose(np.asarray(out), 2 * a)  # the second definition's
    by_ints = OVERLOADED.replace(" && Packed<scalar_t>::fast", "").replace(
        " || !Packed<scalar_t>::fast", "")
    code = cuda_closure(textwrap.dedent(by_ints), "add_kernel<float, 3>")
    assert "a[i] + lanes" in code and "widen(a[i])" not in code


def test_overloads_kport_cannot_tell_apart_are_an_error():
    with pytest.raises(TranslateError, match=r"2 definitions of add_kernel and 2 of them .*"
                                             r"lines 10, 17.*file of its own"):
        cuda_closure(textwrap.dedent(OVERLOADED), "add_kernel<float, 4>", where="k.cu")
    with pytest.raises(TranslateError, match="none fits these template arguments"):
        cuda_closure(textwrap.dedent(OVERLOADED), "add_kernel<float, 4, 2>", where="k.cu")


FOREIGN = """\
    #include <torch/all.h>
    namespace norms {
    template <typename scalar_t>
    struct Packed {
      static constexpr float scale = 2.0f;
    };
    template <>
    struct Packed<c10::Half> {
      static constexpr float scale = 4.0f;
      using native = __half;
    };
    __device__ inline float widen(float x) { return x; }
    __device__ inline float widen(c10::Half x) { return static_cast<float>(x); }

    template <typename scalar_t>
    __global__ void scale_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ a,
                                 int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = widen(a[i]) * Packed<scalar_t>::scale;
    }
    }  // namespace norms
    """


def test_specialisations_for_a_type_of_an_empty_header_are_left_out(tmp_path):
    """vLLM's `_typeConvert<c10::Half>`: torch's headers are read as empty, so c10 is
    undeclared; `<float>` needs neither that specialisation nor that overload."""
    proc = _port(tmp_path, FOREIGN, "scale_kernel<float>", "--size", "n=300")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    cuda = next((tmp_path / "pkg").glob("*.device.cu")).read_text()
    metal = (tmp_path / "pkg" / "kernel.metal").read_text()
    assert "c10" not in cuda and "c10" not in metal
    assert "struct Packed {" in cuda and "float widen(float x)" in cuda


def test_a_type_of_an_empty_header_the_code_needs_is_named():
    src = textwrap.dedent(FOREIGN)
    with pytest.raises(TranslateError, match=r"k\.cu: `struct Packed<c10::Half>` is for "
                                             r"c10::Half, .*the kept code names c10::Half.*-I"):
        cuda_closure(src.replace("widen(a[i])", "widen(c10::Half(a[i]))"), "scale_kernel<float>",
                     where="k.cu")
    with pytest.raises(TranslateError, match=r"`__device__ inline float widen\(c10::Half x\)`"
                                             r".*only definition of widen"):
        cuda_closure(src.replace("__device__ inline float widen(float x) { return x; }\n", ""),
                     "scale_kernel<float>", where="k.cu")


def test_device_code_marked_by_a_macro_and_file_scope_macro_uses(tmp_path):
    """DeepSpeed's `#define DS_D_INLINE __device__ __forceinline__` (its conversion::to was
    left out as host code) and `INSTANTIATE_PAD(float);` at file scope (read as a
    declaration of `float`, so kept: an explicit instantiation of a host template)."""
    proc = _port(tmp_path, """\
        #define DS_D_INLINE __device__ __forceinline__
        namespace conversion {
        template <typename TO, typename FROM>
        DS_D_INLINE TO to(FROM val) { return static_cast<TO>(val); }
        template <>
        DS_D_INLINE float to(float val) { return val * 3.0f; }
        }  // namespace conversion
        template <typename T>
        __global__ void triple(T* out, const T* a, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) out[i] = conversion::to<T>(conversion::to<float>(a[i]));
        }
        template <typename T>
        void launch_triple(T* out, const T* a, int n) {
          triple<T><<<(n + 63) / 64, 64>>>(out, a, n);
        }
        #define INSTANTIATE_TRIPLE(T) template void launch_triple<T>(T*, const T*, int);
        INSTANTIATE_TRIPLE(float);
        """, "triple<float>", "--size", "n=300")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    cuda = next((tmp_path / "pkg").glob("*.device.cu")).read_text()
    assert "INSTANTIATE_TRIPLE(float)" not in cuda and "namespace conversion {" in cuda
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    out = load_package(tmp_path / "pkg", "closure_device_macro").run(a=a, n=64)["out"]
    np.testing.assert_allclose(np.asarray(out), 9 * a, rtol=1e-6)  # the float specialisation, twice


def test_no_using_directive_for_a_namespace_the_metal_header_does_not_declare():
    """vLLM's rms_norm: the kernel sits in `namespace vllm`, but MLX puts its body in the
    kernel function, so the port's header keeps nothing of the namespace; a `using namespace
    vllm;` there is an error in Metal (a namespace it never saw)."""
    src = textwrap.dedent("""\
        namespace vllm {
        template <typename scalar_t>
        __global__ void twice(scalar_t* __restrict__ out, const scalar_t* __restrict__ in, int n) {
            for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = 2 * in[i];
        }
        }  // namespace vllm
        using namespace vllm;
        """)
    tr = translate_kernel(src, "twice<float>", grid=[1], block=[32])
    assert "using namespace vllm" not in tr.header
