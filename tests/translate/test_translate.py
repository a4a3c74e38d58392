"""The offline translator on small kernels: each structural mapping is run in metal_sim and
compared with the CUDA kernel run in cuda_sim; coverage accounting and errors."""

import math

import numpy as np
import pytest

from agent.translate import TranslateError, cuda_closure, translate_kernel
from corpus.cases import evaluate


def run_both(src, kernel, inputs: dict, outs: dict, grid, block, shared_mem=0, roles=None):
    """(translation, CUDA results, Metal results) for outputs by CUDA argument name."""
    import mlx.core as mx

    from runners.cuda_sim import RawKernel
    from runners.metal_sim import metal_kernel

    tr = translate_kernel(src, kernel, roles=roles, grid=grid, block=block,
                          shared_mem=shared_mem)
    args = [inputs[n].copy() if n in inputs else outs[n].copy() for n in tr.roles]
    dims = [int(evaluate(g, {})) for g in grid]
    RawKernel(src, kernel).launch(tuple(dims) + (1,) * (3 - len(dims)),
                                  tuple(block) + (1,) * (3 - len(block)), tuple(args),
                                  shared_mem=shared_mem)
    want = {n: args[i] for i, (n, r) in enumerate(tr.roles.items()) if r in ("out", "inout")}
    like = {o: (outs.get(o.removesuffix("_out")) if o.removesuffix("_out") in outs
                else inputs[o.removesuffix("_out")]) for o in tr.outputs}
    k = metal_kernel("t", tr.inputs, tr.outputs, tr.body, tr.header,
                     atomic_outputs=tr.atomic_outputs)
    template = [(n, int(evaluate(v, {})) if isinstance(v, str) else v)
                for n, v in tr.template.items()]
    got = k(inputs=[mx.array(inputs[n]) for n in tr.inputs],
            output_shapes=[like[o].shape for o in tr.outputs],
            output_dtypes=[mx.array(like[o]).dtype for o in tr.outputs],
            grid=tuple(int(evaluate(e, {})) for e in tr.grid),
            threadgroup=tuple(int(evaluate(e, {})) for e in tr.threadgroup),
            template=template or None, init_value=tr.init_value)
    return tr, want, {o.removesuffix("_out"): np.array(a) for o, a in
                      zip(tr.outputs, got, strict=True)}


def rng(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def test_inout_elementwise_reads_the_input_and_writes_the_output():
    src = """__global__ void saxpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}"""
    n = 1000
    tr, want, got = run_both(src, "saxpy", {"x": rng(n), "y": rng(n, 1), "a": np.float32(2.5),
                                            "n": np.int32(n)}, {}, ["ceil_div(1000, 128)"],
                             [128])
    assert tr.roles == {"x": "in", "y": "inout", "a": "scalar", "n": "scalar"}
    assert tr.outputs == ["y_out"] and "y_out[i] = a * x[i] + y[i]" in tr.body
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)


REDUCE = """
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
__device__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? scratch[threadIdx.x] : 0.0f;
  return warp_sum(v);
}
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) row_sum(const float* __restrict__ x, float* out,
                                                 int n) {
  __shared__ float scratch[32];
  float acc = 0.0f;
  for (int c = threadIdx.x; c < n; c += BLOCK) acc += x[blockIdx.x * n + c];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}"""


def test_shared_memory_barriers_shuffles_templates_and_header_attributes():
    rows, n = 3, 300
    tr, want, got = run_both(REDUCE, "row_sum<128>", {"x": rng(rows * n), "n": np.int32(n)},
                             {"out": np.zeros(rows, np.float32)}, [rows], [128])
    assert tr.template == {"BLOCK": 128}
    # threadIdx in a header function: MLX declares attributes only for the body, so they are
    # passed in as parameters
    assert "uint3 thread_position_in_threadgroup" in tr.header
    assert "threadgroup float* scratch" in tr.header
    assert tr.coverage == 1.0 and not tr.todos
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5)


def test_atomic_outputs_start_at_zero():
    src = """__global__ void hist(const int* x, unsigned int* bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[x[i] & 15], 1u);
}"""
    n = 777
    x = np.random.default_rng(3).integers(0, 100, n).astype(np.int32)
    tr, want, got = run_both(src, "hist", {"x": x, "n": np.int32(n)},
                             {"bins": np.zeros(16, np.uint32)}, ["ceil_div(777, 64)"], [64])
    assert tr.atomic_outputs and tr.init_value == 0.0
    assert "atomic_fetch_add_explicit(&bins[x[i] & 15], 1u, memory_order_relaxed)" in tr.body
    np.testing.assert_array_equal(got["bins"], want["bins"])


def test_threadgroup_atomics_and_dynamic_shared_memory():
    src = """__global__ void count(const int* x, unsigned int* out, float* copy, int n) {
  extern __shared__ float buf[];
  __shared__ unsigned int hits;
  if (threadIdx.x == 0) hits = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? (float)x[i] : 0.0f;
  if (i < n && x[i] > 0) atomicAdd(&hits, 1u);
  __syncthreads();
  if (i < n) copy[i] = buf[blockDim.x - 1 - threadIdx.x];
  if (threadIdx.x == 0) out[blockIdx.x] = hits;
}"""
    n = 256
    x = np.random.default_rng(5).integers(-5, 5, n).astype(np.int32)
    tr, want, got = run_both(src, "count", {"x": x, "n": np.int32(n)},
                             {"out": np.zeros(4, np.uint32), "copy": np.zeros(n, np.float32)},
                             [4], [64], shared_mem=64 * 4)
    assert "threadgroup atomic_uint hits;" in tr.body
    assert "buf[KP_SMEM_BYTES / sizeof(float)]" in tr.body
    np.testing.assert_array_equal(got["out"], want["out"])
    np.testing.assert_array_equal(got["copy"], want["copy"])


def test_inout_through_a_local_pointer_and_a_device_function():
    src = """__device__ void rot(float* v, int j, int h, float c, float s) {
  const float a = v[j], b = v[j + h];
  v[j] = a * c - b * s;
  v[j + h] = b * c + a * s;
}
__global__ void rope(float* q, const float* cs, int dim) {
  float* row = q + blockIdx.x * dim;
  for (int j = threadIdx.x; j < dim / 2; j += blockDim.x)
    rot(row, j, dim / 2, cs[j], cs[dim / 2 + j]);
}"""
    rows, dim = 4, 64
    tr, want, got = run_both(src, "rope", {"q": rng(rows * dim), "cs": rng(dim, 2),
                                           "dim": np.int32(dim)}, {}, [rows], [16])
    assert "device float* row_out = q_out + " in tr.body
    assert "const device float* v, device float* v_out" in tr.header
    np.testing.assert_allclose(got["q"], want["q"], rtol=1e-6)


def test_unmapped_constructs_become_counted_todos():
    src = """__global__ void k(float* y) {
  __nanosleep(100);
  y[threadIdx.x] = 1.0f;
}"""
    tr = translate_kernel(src, "k", grid=[1], block=[32])
    assert tr.unmapped == {"__nanosleep": 1} and tr.mapped["threadIdx"] == 1
    assert "/* KPORT-TODO(debug.clock_timing)" in tr.body
    assert tr.todos[0].line == 2 and tr.coverage == pytest.approx(1 / 2)


def test_what_msl_3_1_cannot_express_is_a_todo_not_a_port():
    # a lambda (no lambdas before MSL 4.0) and a __shared__ array in a template __device__
    # function (MSL declares threadgroup memory only in kernels; kport moves a plain helper's
    # array into the kernel, not one whose type or size may be a template parameter):
    # metal_sim refuses both, so neither counts
    src = """template <int N> __device__ float total(float v) {
  __shared__ float buf[N];
  buf[threadIdx.x] = v;
  __syncthreads();
  return buf[0];
}
__global__ void k(const float* x, float* y) {
  auto twice = [](float v) { return 2.0f * v; };
  y[threadIdx.x] = twice(total<32>(x[threadIdx.x]));
}"""
    tr = translate_kernel(src, "k", grid=[1], block=[32])
    assert {t.rule for t in tr.todos} == {"memory.static_shared", "types.lambda"}
    assert sorted(t.line for t in tr.todos) == [2, 8]
    assert "KPORT-TODO(types.lambda)" in tr.body and "KPORT-TODO(memory.static_shared)" in tr.header
    assert tr.coverage < 1


def test_roles_are_inferred_and_said_to_be_guesses():
    src = """__global__ void k(const float* a, float* b, float* c, float* d, int n) {
  int i = threadIdx.x;
  b[i] = a[i];
  c[i] += a[i];
  float t = d[i];
  (void)t; (void)n;
}"""
    tr = translate_kernel(src, "k")
    assert tr.roles == {"a": "in", "b": "out", "c": "inout", "d": "in", "n": "scalar"}
    assert any("c: role inout" in g for g in tr.guessed)


def test_unknown_kernel_and_missing_template_values_are_clear_errors():
    with pytest.raises(TranslateError, match="no kernel named 'nope'; kernels here: row_sum"):
        translate_kernel(REDUCE, "nope")
    with pytest.raises(TranslateError, match="template parameter 'BLOCK' has no value"):
        translate_kernel(REDUCE, "row_sum")


def test_atomic_cas_is_strong_through_the_helper():
    src = """__global__ void claim(int* slots, int* won, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    int old = atomicCAS(&slots[t % 8], 0, t + 1);
    atomicAdd(&won[0], old == 0 ? 1 : 0);
  }
}"""
    n = 200
    tr, want, got = run_both(src, "claim", {"n": np.int32(n)},
                             {"slots": np.zeros(8, np.int32), "won": np.zeros(1, np.int32)},
                             ["ceil_div(200, 64)"], [64], roles={"slots": "out", "won": "out",
                                                                "n": "scalar"})
    assert "kport_atomic_cas(&slots[t % 8], 0, t + 1)" in tr.body
    assert "inline T kport_atomic_cas" in tr.header
    assert int(got["won"][0]) == int(want["won"][0]) == 8


HELPER_MACROS = """
#define WARP_SIZE 32
#define GGML_CUDA_RESTRICT __restrict__  // as llama.cpp's common.cuh
static __device__ float warp_sum(float v) {
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1)  // as llama.cpp's warp_reduce_sum
        v += __shfl_xor_sync(0xffffffff, v, off, WARP_SIZE);
    return v;
}
__global__ void rowsum(const float * GGML_CUDA_RESTRICT x, float * GGML_CUDA_RESTRICT y,
                       const int n) {
    const float * GGML_CUDA_RESTRICT row = x + blockIdx.x * n;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += WARP_SIZE) s += row[i];
    s = warp_sum(s);
    if (threadIdx.x == 0) y[blockIdx.x] = s;
}
"""


def test_user_macros_are_the_users_and_qualifier_macros_are_qualifiers():
    """Issue 15: `#define WARP_SIZE 32` became `#define 32 32`, and a parameter behind
    `GGML_CUDA_RESTRICT` was named after the macro; the port now runs right."""
    x = np.random.default_rng(3).standard_normal(4 * 32).astype(np.float32)
    tr, want, got = run_both(HELPER_MACROS, "rowsum", {"x": x, "n": np.int32(32)},
                             {"y": np.zeros(4, np.float32)}, ["4"], [32])
    assert "#define WARP_SIZE 32" in tr.header and "#define 32" not in tr.header
    assert tr.inputs == ["x", "n"] and tr.outputs == ["y"]
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)


def test_a_cuda_call_behind_a_macro_is_a_counted_todo():
    src = HELPER_MACROS.replace("v += __shfl_xor_sync(", "v += SHFL_XOR_SYNC(").replace(
        "#define WARP_SIZE 32", "#define WARP_SIZE 32\n#define SHFL_XOR_SYNC __shfl_xor_sync")
    tr = translate_kernel(src, "rowsum", grid=["4"], block=[32])
    assert [t.construct for t in tr.todos] == ["__shfl_xor_sync"]
    assert "KPORT-TODO(warp.shfl_xor)" in tr.header


def test_template_arguments_nest_and_defaults_fill_in():
    """Issue 15: `Causal_conv1d_update_kernel_traits<64, 4, float, float>` was split at its
    inner commas and a defaulted parameter's default read as its name."""
    src = """template <int N, typename T = float, bool B = true>
__global__ void k(const T* x, T* y) { int i = threadIdx.x; if (B) y[i] = x[i] * N; }"""
    assert translate_kernel(src, "k<4>").template == {"N": 4, "T": "float32", "B": True}
    assert translate_kernel(src, "k<4, half, false>").template == {
        "N": 4, "T": "float16", "B": False}
    # an argument MLX cannot pass as a template value (not an int, bool or dtype) is bound by
    # a macro the kernel's signature and body see
    traits = translate_kernel(src, "k<Traits<64, 4, float>, float>", strict=False)
    assert "N" not in traits.template
    assert "#define N Traits<64, 4, float>" in traits.header
    with pytest.raises(TranslateError, match=r"4 template arguments given for 3 parameters"):
        translate_kernel(src, "k<4, float, false, 1>")


def test_a_function_as_template_argument_is_bound_and_pulled_into_the_closure():
    """Issue 15: `unary_op_kernel<op_gelu, float>`: `op` was read as the parameter named
    `(*op)(float)`, op_gelu was left out of the device code, and MLX cannot take a function as a
    template value."""
    src = """static __device__ float op_sq(float x) { return x * x; }
template <float (*op)(float), typename T>
static __global__ void unary(const T * x, T * dst, const int k) {
    const int i = blockDim.x*blockIdx.x + threadIdx.x;
    if (i < k) dst[i] = op(x[i]);
}"""
    tr = translate_kernel(src, "unary<op_sq, float>")
    assert tr.template == {"T": "float32"}
    assert "#define op op_sq" in tr.header and "op_sq(float x)" in tr.header
    assert "op_sq" in cuda_closure(src, "unary<op_sq, float>")


def test_a_parameter_with_a_default_value_is_still_a_parameter():
    """Issue 15: `const int off = 0` vanished from the port's inputs (and a default such as
    `= make_uint3(0, 0, 0)` was read as the parameter's name)."""
    src = """__global__ void pad(const float * x, float * y, const int n, const int off = 0) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + off;
}"""
    x = rng(64)
    tr, want, got = run_both(src, "pad", {"x": x, "n": np.int32(64), "off": np.int32(3)},
                             {"y": np.zeros(64, np.float32)}, ["2"], [32])
    assert tr.inputs == ["x", "n", "off"]
    np.testing.assert_array_equal(got["y"], want["y"])
    from runners.cuda_sim import parameter_names

    assert parameter_names(src.replace("const int off = 0", "uint3 off = make_uint3(0, 0, 0)"),
                           "pad") == ["x", "y", "n", "off"]


def test_a_header_ending_in_a_define_does_not_swallow_mlxs_template_line():
    """Issue 15: MLX pastes the header verbatim before `template <...>`; a header without a
    final newline glued its last `#define` onto that line."""
    src = """#define SCALE 2.0f
template <int N>
__global__ void k(const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = SCALE * x[i];
}"""
    x = rng(64)
    tr, want, got = run_both(src, "k<64>", {"x": x}, {"y": np.zeros(64, np.float32)},
                             ["2"], [32])
    assert tr.header.endswith("#define SCALE 2.0f\n")
    np.testing.assert_array_equal(got["y"], want["y"])


def test_real_code_idioms_pointer_advance_erf_and_int_arguments_to_float_math():
    """Issue 15, found on llama.cpp: `dst += row * n` made dst in-out (it moves the pointer, it
    reads nothing); `erff` has no Metal counterpart (kport's helper stands in); `logf(period)`
    with an int argument is ambiguous in Metal unless converted as C converts it; `assert` is
    dropped as a release build drops it."""
    src = """#include <cassert>
__global__ void k(const float * x, float * dst, const int n, const int period) {
    const int row = blockIdx.x, c = threadIdx.x;
    assert(c >= 0);
    x += row * n;
    dst += row * n;
    if (c < n) dst[c] = erff(x[c]) * logf(period);
}"""
    x = np.linspace(-4, 4, 3 * 40, dtype=np.float32)
    tr, want, got = run_both(src, "k", {"x": x, "n": np.int32(40), "period": np.int32(7)},
                             {"dst": np.zeros_like(x)}, grid=["3"], block=[64])
    assert tr.roles["dst"] == "out" and "kport_erf" in tr.header
    assert "log(float(period))" in tr.body and "assert" not in tr.body
    expected = np.array([math.erf(v) * math.log(7) for v in x.astype(float)])
    np.testing.assert_allclose(want["dst"], expected, rtol=0, atol=2e-6)
    np.testing.assert_allclose(got["dst"], expected, rtol=0, atol=2e-6)


def test_attribute_macros_do_not_hide_declarations_from_the_closure():
    """Issue 15: ggml.h's `GGML_API` (an attribute and `extern`) and
    `GGML_ATTRIBUTE_FORMAT(3, 4)` broke tree-sitter's parse of the header, so `enum ggml_op_pool`,
    a kernel's parameter type, was left out of the device code."""
    src = """#define API __attribute__ ((visibility ("default"))) extern
#define FORMAT(...) __attribute__((format(printf, __VA_ARGS__)))
#define NORETURN [[noreturn]]
extern "C" {
    NORETURN FORMAT(3, 4)
    API void ggml_abort(const char * file, int line, const char * fmt, ...);
    API float ggml_fp16_to_fp32(unsigned short);
    enum pool_op { POOL_MAX, POOL_AVG };
}
__global__ void pool(const float * x, float * y, const enum pool_op op) {
    y[threadIdx.x] = op == POOL_AVG ? x[threadIdx.x] : -x[threadIdx.x];
}"""
    code = cuda_closure(src, "pool")
    assert "enum pool_op { POOL_MAX, POOL_AVG }" in code and "ggml_abort" not in code


def test_references_get_their_memory():
    """Issue 15, llama.cpp's rwkv_wkv_f32: `const float4& k = (float4&)(_k[j])` views shared
    memory; MSL wants the reference's address space (threadgroup here, thread for a local)."""
    src = """__global__ void k(const float * x, float * y, int n) {
  __shared__ float _k[64];
  int i = threadIdx.x;
  _k[i] = x[i];
  __syncthreads();
  float acc = 0.f;
  float& a = acc;
  for (int j = 0; j < 64; j += 4) {
    const float4& v = (float4&)(_k[j]);
    a += v.x * v.y + v.z - v.w;
  }
  y[i] = acc + i;
}"""
    x = rng(64)
    tr, want, got = run_both(src, "k", {"x": x, "n": np.int32(64)},
                             {"y": np.zeros(64, np.float32)}, grid=["1"], block=[64])
    assert "(threadgroup float4&)(_k[j])" in tr.body and "thread float& a = acc" in tr.body
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)


def test_a_helpers_shared_array_lives_in_the_kernel():
    """Issue 15, llama.cpp's reduce_row_f32 (sumrows.cu): `__shared__ float shared_vals[32]`
    inside a device function. MSL declares threadgroup memory only in a kernel: the port
    declares it there (one per threadgroup, as CUDA's static one is) and passes it in."""
    src = """static __device__ float row_sum(const float * x, const int n) {
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
    __shared__ float vals[32];
    vals[threadIdx.x] = s;
    __syncthreads();
    float t = 0.f;
    for (int i = 0; i < 32; ++i) t += vals[i];
    __syncthreads();
    return t;
}
__global__ void k(const float * x, float * y, const int n) {
    const float v = row_sum(x + blockIdx.x * n, n);
    if (threadIdx.x == 0) y[blockIdx.x] = v;
}"""
    x = rng(3 * 100)
    tr, want, got = run_both(src, "k", {"x": x, "n": np.int32(100)},
                             {"y": np.zeros(3, np.float32)}, grid=["3"], block=[32])
    assert "threadgroup float kp_row_sum_vals[32];" in tr.body and not tr.todos
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5)
    np.testing.assert_allclose(want["y"], x.reshape(3, 100).sum(1), rtol=1e-5)
