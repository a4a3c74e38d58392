"""What stopped mamba-ssm's selective_scan_fwd_kernel (issue 16), each in small: traits
constants and type comparisons folded so that the ``if constexpr`` branches an instantiation
never takes leave the port (the kernel's and its helpers'), ``std::conditional_t`` and
``M_LOG2E`` in Metal's spelling, PyTorch's ``c10::complex`` on kport's Metal stand-in, a name
MLX's prelude declares renamed, CUB's Load and Store inside helpers (their effects, their
``TempStorage&`` and ``const float (&)[N]`` parameters, read-only pointers and their casts),
and a parameters struct whose rows have no innermost stride field. Ports run in both
simulators (tests/translate/test_translate.py ``run_both``) or through ``kport port``."""

from __future__ import annotations

import textwrap

import numpy as np

from agent.translate.traits import Instantiation
from kb.parse import parse
from tests.cli import kport, load_package
from tests.translate.test_translate import run_both

TRAITS = """
#include <type_traits>
template <int kN_, bool kScaled_, typename weight_t_> struct Traits {
  using weight_t = weight_t_;
  static constexpr int kN = kN_;
  static constexpr bool kScaled = kScaled_;
  static constexpr bool kIsFloat = std::is_same_v<weight_t, float>;
  static constexpr bool kWide = sizeof(weight_t) == 8 && kN > 2;
};
template <typename K>
__device__ void apply(const float *x, float *y, int i) {
  if constexpr (K::kIsFloat) {
    y[i] = 2.0f * x[i];
  } else {
    typename K::weight_t w(x[i], 0.0f);  // a complex weight: no float has real_
    y[i] = w.real_;
  }
}
template <typename K>
__global__ void k(const float *x, float *y, const float *scale) {
  using weight_t = typename K::weight_t;
  constexpr bool kScaled = K::kScaled;
  const int i = threadIdx.x;
  weight_t a = x[i];
  if constexpr (!K::kIsFloat) {
    a.real_ *= 2.0f;  // instantiated only for a complex weight_t
  }
  if constexpr (kScaled || K::kWide) {
    y[i] = scale[i] * a;
  } else {
    apply<K>(x, y, i);
  }
}
"""


def test_the_branches_an_instantiation_never_takes_leave_the_kernel_and_its_helpers():
    """mamba's kernel is a template over its traits in CUDA, whose discarded branches are
    never instantiated; the port binds Ktraits by a #define, so Metal checks both branches
    (``a.real_`` on a float does not compile). Traits members (``K::kScaled``, an
    ``is_same_v``, a ``sizeof``) fold and the dead branches go (``scale[i]`` with them), in
    the kernel and in ``apply<K>``, which every call instantiates alike."""
    x = np.arange(32, dtype=np.float32)
    tr, want, got = run_both(TRAITS, "k<Traits<4, false, float>>",
                             {"x": x, "scale": np.ones(32, np.float32)},
                             {"y": np.zeros(32, np.float32)}, ["1"], [32])
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["y"], 2 * x)
    assert "real_" not in tr.body + tr.header and "scale[i]" not in tr.body


TWO_INSTANTIATIONS = """
#include <type_traits>
template <bool kDouble> __device__ float pick(float v) {
  if constexpr (kDouble) { return 2.0f * v; } else { return v + 1.0f; }
}
template <typename T> __device__ T scaled(T v) {
  if constexpr (std::is_same_v<T, float>) { return 2 * v; } else { return 3 * v; }
}
__global__ void k(const float *x, float *y) {
  const float v = x[threadIdx.x];
  y[threadIdx.x] = pick<true>(v) + pick<false>(v) + scaled<float>(v) + scaled(int(v));
}
"""


def test_a_helper_instantiated_twice_keeps_both_branches():
    """Only a function template every call of which names the same arguments is pruned for
    them: ``pick<true>`` and ``pick<false>``, ``scaled<float>`` and a deduced ``scaled(int)``
    each need both branches."""
    x = np.arange(32, dtype=np.float32)
    tr, want, got = run_both(TWO_INSTANTIATIONS, "k", {"x": x}, {"y": np.zeros(32, np.float32)},
                             ["1"], [32])
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["y"], 3 * x + 1 + 2 * x + 3 * x)


def test_type_comparisons_decide_only_what_is_sure():
    """``is_same_v`` folds where the types are surely equal or surely not: a builtin is no
    class (float is no ``c10::complex<float>``), float2 no float4; spellings that may name one
    type (``long`` and ``int64_t``) and an unbound template parameter decide nothing."""
    data = b"using cplx = c10::complex<float>;\nstruct S { int a; };\n"
    inst = Instantiation(parse(data, "cuda"), data, {})
    assert inst.same("float", "float") and inst.same("unsigned int", "uint32_t")
    assert inst.same("float", inst.resolve("cplx", {})) is False
    assert inst.same("S", "int") is False and inst.same("float2", "float4") is False
    assert inst.same("long", "int64_t") is None and inst.same("T", "float") is None


SPELLINGS = """
#include <math.h>
#include <type_traits>
template <bool kPair> struct Traits {
  using vec_t = std::conditional_t<kPair, float2, float4>;
};
__global__ void k(const float *x, float *y) {
  constexpr float kLog2e = M_LOG2E;
  typename Traits<true>::vec_t v = make_float2(x[threadIdx.x], 1.0f);
  y[threadIdx.x] = exp2f(v.x * kLog2e) + v.y;
}
"""


def test_std_conditional_t_and_math_h_constants_take_metals_spelling():
    """``std::conditional_t`` is ``metal::conditional_t`` (MLX's kernels spell it so) and
    ``M_LOG2E`` is ``M_LOG2E_F`` (MSL has no double constants)."""
    x = np.linspace(-2, 2, 32).astype(np.float32)
    tr, want, got = run_both(SPELLINGS, "k", {"x": x}, {"y": np.zeros(32, np.float32)},
                             ["1"], [32])
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    assert "metal::conditional_t" in tr.header and "M_LOG2E_F" in tr.body and not tr.todos


COMPLEX = """
#include <c10/util/complex.h>
using cplx = c10::complex<float>;
template <typename T> struct Op;
template <> struct Op<cplx> {
  __device__ cplx operator()(const cplx &a, const cplx &b) const { return a * b + a; }
};
__global__ void k(const float *x, float *y) {
  const int i = threadIdx.x;
  cplx a(x[2 * i], x[2 * i + 1]), b(0.5f, -1.5f);
  cplx c = Op<cplx>()(a, b) * 2.0f;
  y[i] = c.real_ + c.imag();
}
"""


def test_c10_complex_ports_onto_kports_metal_stand_in():
    """PyTorch's c10::complex comes from a host header kport reads as empty: the port maps it
    onto kport_c10 (c10's layout and arithmetic), which the header then carries."""
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    tr, want, got = run_both(COMPLEX, "k", {"x": x}, {"y": np.zeros(32, np.float32)},
                             ["1"], [32])
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    assert "kport_c10::complex<float>" in tr.header and "namespace kport_c10" in tr.header
    assert "types.c10_complex" in tr.rules_used and not tr.todos


PRELUDE_NAME = """
using complex_t = float2;
struct Limits { float lo, hi; };
__global__ void k(const float *x, float *y) {
  complex_t z = make_float2(x[threadIdx.x], 3.0f);
  Limits l = {-1.0f, 1.0f};
  y[threadIdx.x] = fminf(fmaxf(z.x * z.y, l.lo), l.hi);
}
"""


def test_a_name_mlxs_prelude_declares_is_renamed():
    """MLX's metal_kernel prelude declares complex_t (a class template) and Limits at file
    scope: mamba's ``using complex_t = ...`` would be a redefinition in the port."""
    x = np.linspace(-1, 1, 32).astype(np.float32)
    tr, want, got = run_both(PRELUDE_NAME, "k", {"x": x}, {"y": np.zeros(32, np.float32)},
                             ["1"], [32])
    np.testing.assert_array_equal(got["y"], want["y"])
    assert "using complex_t_kp = float2" in tr.header and "struct Limits_kp" in tr.header


CUB_HELPERS = """
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>
template <int kThreads_, bool kVec_> struct Traits {
  static constexpr int kThreads = kThreads_;
  static constexpr bool kVec = kVec_;
  using LoadT = cub::BlockLoad<float, kThreads, 4, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using LoadVecT = cub::BlockLoad<float4, kThreads, 1, cub::BLOCK_LOAD_DIRECT>;
  using StoreT = cub::BlockStore<float, kThreads, 4, cub::BLOCK_STORE_WARP_TRANSPOSE>;
};
template <typename K>
__device__ void load_row(float *x, float (&vals)[4], typename K::LoadT::TempStorage &smem,
                         int n) {
  if constexpr (K::kVec) {  // rows of whole float4s: one vector per thread
    auto &smem_vec = reinterpret_cast<typename K::LoadVecT::TempStorage &>(smem);
    typename K::LoadVecT(smem_vec).Load(reinterpret_cast<float4 *>(x),
                                        reinterpret_cast<float4 (&)[1]>(vals));
  } else {
    typename K::LoadT(smem).Load(x, vals, n, 0.0f);
  }
}
template <typename K>
__device__ void store_row(float *out, const float (&vals)[4],
                          typename K::StoreT::TempStorage &smem, int n) {
  float w[4];
  for (int i = 0; i < 4; ++i) w[i] = vals[i];
  typename K::StoreT(smem).Store(out, w, n);
}
template <typename K>
__global__ void k(float *x, float *out, int n) {
  extern __shared__ char smem_[];
  auto &smem_load = reinterpret_cast<typename K::LoadT::TempStorage &>(smem_);
  auto &smem_store = reinterpret_cast<typename K::StoreT::TempStorage &>(smem_);
  float vals[4];
  load_row<K>(x + blockIdx.x * n, vals, smem_load, n);
  for (int i = 0; i < 4; ++i) vals[i] = 3.0f * vals[i] + 1.0f;
  __syncthreads();
  store_row<K>(out + blockIdx.x * n, vals, smem_store, n);
}
"""


def test_cub_load_and_store_inside_helpers():
    """mamba's load_input/store_output: ``out`` is written only by CUB's Store inside a helper
    (an output; it was guessed an input), ``x`` only loaded (an input, its non-const helper
    parameter and the helper's cast of it then ``const device``), the ``TempStorage&`` takes
    the kernel's shared memory itself (no copy), the helper's ``const float (&)[4]`` is a
    thread reference, and a TempStorage cast of that reference is ``threadgroup``."""
    x = np.random.default_rng(1).standard_normal(2 * 128).astype(np.float32)
    for kernel, n in (("k<Traits<32, false>>", 100), ("k<Traits<32, true>>", 128)):
        tr, want, got = run_both(CUB_HELPERS, kernel, {"x": x, "n": np.int32(n)},
                                 {"out": np.zeros(2 * 128, np.float32)}, ["2"], [32],
                                 shared_mem=1024)
        assert tr.roles["x"] == "in" and tr.roles["out"] == "out", tr.roles
        # two rows of n (a guarded Store writes n items of a row)
        np.testing.assert_array_equal(got["out"][:2 * n], want["out"][:2 * n])
        assert "kp_ref" not in tr.body and "threadgroup thread" not in tr.header
        assert "const thread float (&vals)[4]" in tr.header
    assert "reinterpret_cast<const device float4 *>(x)" in tr.header


AUTO_VIEWS = """
__device__ void put(float *dst, float *src, int i) { auto p = dst + i; p[0] = 2.0f * src[i]; }
__global__ void k(float *x, float *y) { put(y, x, threadIdx.x); }
"""


def test_a_helper_parameter_written_through_an_auto_view_stays_writable():
    """A helper pointer parameter is ``const device`` only when the helper never writes
    through it; ``auto p = dst + i; p[0] = ...`` writes dst (else: a write through const)."""
    x = np.arange(32, dtype=np.float32)
    tr, want, got = run_both(AUTO_VIEWS, "k", {"x": x}, {"y": np.zeros(32, np.float32)},
                             ["1"], [32])
    np.testing.assert_array_equal(got["y"], want["y"])
    assert "void put(device float *dst, const device float *src" in tr.header


ROWS = textwrap.dedent("""\
    #include <cstdint>
    struct RowParams {
        int batch, dim, len;
        uint64_t u_batch_stride, u_d_stride;
        uint64_t out_batch_stride, out_d_stride;
        void *__restrict__ u_ptr;
        void *__restrict__ out_ptr;
    };
    __global__ void rows(RowParams params) {
        // mamba's u: no stride for the innermost dimension, read in chunks along a row
        const float *u = reinterpret_cast<float *>(params.u_ptr)
            + blockIdx.x * params.u_batch_stride + blockIdx.y * params.u_d_stride;
        float *out = reinterpret_cast<float *>(params.out_ptr)
            + blockIdx.x * params.out_batch_stride + blockIdx.y * params.out_d_stride;
        for (int l = threadIdx.x; l < params.len; l += 32) { out[l] = u[l] * u[l]; }
    }
    """)


def test_rows_without_an_innermost_stride_field_get_contiguous_strides(tmp_path):
    """The probe took the last stride field for the innermost one (``u_d_stride = 1``), so the
    rows of u and out overlapped (``u_batch_stride = 103``) and blocks wrote each other's
    output. The row read whole is the innermost dimension: ``u_d_stride = len``. A caller's
    own layout (padded rows) is no size: run() takes it."""
    path = tmp_path / "rows.cu"
    path.write_text(ROWS)
    out = tmp_path / "pkg"
    proc = kport("port", str(path), "--kernel", "rows", "--offline", "--no-kb",
                 "--size", "batch=2", "--size", "dim=3", "--size", "len=70",
                 "--grid", "batch, dim", "--block", "32", "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    case = (out / "case.guessed.toml").read_text()
    assert '{ name = "u_d_stride", dtype = "uint64", value = "len" }' in case
    assert '{ name = "u_batch_stride", dtype = "uint64", value = "dim * len" }' in case
    module = load_package(out, "kport_rows_port")
    u = np.random.default_rng(2).standard_normal((2, 3, 80)).astype(np.float32)
    got = module.run(params={"batch": 2, "dim": 3, "len": 70, "u_ptr": u.reshape(-1),
                             "u_batch_stride": 240, "u_d_stride": 80,
                             "out_batch_stride": 210, "out_d_stride": 70})
    want = (u[:, :, :70] ** 2).reshape(-1)
    np.testing.assert_allclose(np.asarray(got["params.out_ptr"])[:want.size], want, rtol=1e-6)
