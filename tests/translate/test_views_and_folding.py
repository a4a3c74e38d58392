"""Atomics through a pointer cast (llama.cpp's count_equal), 64-bit atomics, ternaries whose
branches point into different memories (llama.cpp's soft_max_f32), and the closure of a
struct's methods: each port run in metal_sim against the CUDA kernel in cuda_sim."""

import numpy as np
import pytest

from agent.translate import cuda_closure, translate_kernel
from agent.translate.folding import constexpr_values, fold
from kb.parse import parse

from .test_translate import run_both

COUNT_EQUAL = """
__global__ void count_equal(const int* x, const int* y, long long* dst, const long long k) {
  long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
  if (i < k && x[i] == y[i]) atomicAdd((int *) dst, 1);
}"""


def test_an_atomic_through_a_cast_views_the_plain_buffer_as_cuda_does():
    r = np.random.default_rng(0)
    x, y = r.integers(0, 3, 1000).astype(np.int32), r.integers(0, 3, 1000).astype(np.int32)
    tr, want, got = run_both(COUNT_EQUAL, "count_equal", {"x": x, "y": y,
                                                          "k": np.int64(1000)},
                             {"dst": np.zeros(1, np.int64)}, ["8"], [128])
    assert "atomic_fetch_add_explicit((device atomic_int*)(dst), 1, memory_order_relaxed)" \
        in tr.body, tr.body
    # the int64 buffer stays plain (Metal has no atomic<int64_t>) and starts at 0
    assert not tr.atomic_outputs and tr.init_value == 0 and not tr.todos
    assert "atomics.narrow_view" in tr.rules_used
    assert got["dst"][0] == want["dst"][0] == np.sum(x == y)


def test_a_cast_of_an_element_address_views_that_element():
    src = """__global__ void hist(const int* x, long long* bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd((unsigned int *) &bins[x[i] & 3], 1u);
}"""
    x = np.random.default_rng(1).integers(0, 100, 500).astype(np.int32)
    tr, want, got = run_both(src, "hist", {"x": x, "n": np.int32(500)},
                             {"bins": np.zeros(4, np.int64)}, ["4"], [128])
    assert "(device atomic_uint*)(&bins[x[i] & 3])" in tr.body, tr.body
    np.testing.assert_array_equal(got["bins"], want["bins"])
    np.testing.assert_array_equal(got["bins"], np.bincount(x & 3, minlength=4))


@pytest.mark.parametrize("call", ["atomicAdd(&dst[0], 1ull)",
                                  "atomicAdd((unsigned long long *) dst, 1ull)"])
def test_a_64_bit_atomic_is_a_todo_naming_its_line(call):
    src = ("__global__ void k(unsigned long long* dst, const float* x) {\n"
           "  if (x[threadIdx.x] > 0.0f)\n"
           f"    {call};\n}}\n")
    tr = translate_kernel(src, "k", grid=[1], block=[32])
    assert [(t.rule, t.line) for t in tr.todos] == [("atomics.int64_device", 3)], tr.todos
    assert not tr.atomic_outputs  # no `device atomic<ulong>*` that add could never use


SOFTMAX_LIKE = """
__device__ float block_sum(float v, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  float s = 0.0f;
  for (int j = 0; j < blockDim.x; ++j) s += scratch[j];
  __syncthreads();
  return s;
}

template <bool use_shared, int ncols_template>
__global__ void k(const float* x, float* y, int n) {
  const int ncols = ncols_template == 0 ? n : ncols_template;
  __shared__ float data[128];
  float* buf = data;
  float* vals = use_shared ? buf + 64 : y;
  int i = threadIdx.x;
  vals[i] = x[i] * 2.0f;
  __syncthreads();
  float other = vals[ncols - 1 - i];
  float total = block_sum(other, buf);
  y[i] = total - other;
}"""


@pytest.mark.parametrize("use_shared", ["true", "false"])
def test_a_ternary_across_memories_takes_the_branch_its_template_argument_picks(use_shared):
    x = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    tr, want, got = run_both(SOFTMAX_LIKE, f"k<{use_shared}, 0>",
                             {"x": x, "n": np.int32(64)}, {"y": np.zeros(64, np.float32)},
                             ["1"], [64])
    vals = "threadgroup float* vals = (buf + 64);" if use_shared == "true" else \
        "device float* vals = (y);"
    assert vals in tr.body and not tr.todos, tr.body
    # the helper gets the local pointer into shared memory as a threadgroup pointer
    assert "block_sum(float v, threadgroup float* scratch" in tr.header, tr.header
    # a ternary within one memory stays as written
    assert "ncols_template == 0 ? n : ncols_template" in tr.body
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("decl,todo", [
    ("constexpr int kind = 2;", False),  # a constexpr folds as a template argument does
    ("int kind = n;", True),  # known only when the kernel runs
])
def test_a_ternary_across_memories_with_a_runtime_condition_is_a_todo(decl, todo):
    src = ("__global__ void k(float* y, int n) {\n"
           "  __shared__ float buf[64];\n"
           f"  {decl}\n"
           "  float* vals = kind == 2 ? buf : y;\n"
           "  vals[threadIdx.x] = 1.0f;\n"
           "  y[64] = 2.0f;\n}\n")
    tr = translate_kernel(src, "k", grid=[1], block=[64])
    if todo:
        assert [(t.rule, t.line) for t in tr.todos] == [
            ("memory.conditional_address_space", 4)], tr.todos
    else:
        assert "threadgroup float* vals = (buf);" in tr.body and not tr.todos, tr.body


@pytest.mark.parametrize("expr,value", [
    ("7 / -2", -3), ("-7 % 2", -1), ("(1 << 4) + 3 * 2", 22), ("!(3 == 3) || N > 1", True),
    ("0 && unknown", False), ("unknown || 1", None), ("N ? 10 : 20", 10), ("0x10 >= 16", True),
    ("1 / 0", None), ("1.5 > 1", None), ("0u - 1 > 0", None),  # unsigned wraps: left alone
])
def test_fold_evaluates_as_cpp_does(expr, value):
    data = f"int z = {expr};".encode()
    init = parse(data, "cuda").children[0].child_by_field_name("declarator")
    assert fold(init.child_by_field_name("value"), data, {"N": 4}) == value


def test_constexpr_values_leave_out_names_declared_again():
    data = b"""constexpr int A = 4; constexpr bool B = A > 3;
struct S { static constexpr int C = 1; };
__global__ void k(int A2) { constexpr int D = A * 2; for (int A = 0; A < 2; ++A) {} }"""
    root = parse(data, "cuda")
    assert constexpr_values(root, data, {}) == {"A": 4, "B": True}
    kernel = root.children[-1]
    # `A` is declared again by the loop: which one a use sees depends on where it is
    assert constexpr_values(kernel, data, {"A": 4}) == {"D": 8}


def test_the_closure_keeps_what_a_kept_structs_methods_call():
    """llama.cpp's block_reduce calls block_reduce_policy<...>::reduce: the SUM version calls
    warp_reduce_sum, the MAX one warp_reduce_max. Both are `reduce`, so following calls by
    name finds one; the closure must carry both, or the oracle's build fails."""
    src = """
__device__ float warp_max(float x) { return x; }
__device__ float warp_sum(float x) { return x; }
__host__ float host_only(float x) { return x; }
template <int M> struct policy;
template <> struct policy<0> { static __device__ float reduce(float v) { return warp_sum(v); } };
template <> struct policy<1> { static __device__ float reduce(float v) { return warp_max(v); } };
template <int M> __device__ float block_reduce(float v) { return policy<M>::reduce(v); }
__global__ void k(float* y) { y[0] = block_reduce<1>(y[0]) + 1.0f; }
"""
    from runners.cuda_sim import RawKernel

    closure = cuda_closure(src, "k")
    assert "warp_max" in closure and "host_only" not in closure
    y = np.array([2.0], np.float32)
    assert RawKernel(closure, "k").launch((1, 1, 1), (1, 1, 1), (y,)).ok
    assert y[0] == 3.0


def test_a_strong_cas_through_a_cast_views_the_word_too():
    src = """__global__ void claim(long long* owner, int* won) {
  int old = atomicCAS((int *) owner, 0, (int) blockIdx.x + 1);
  if (threadIdx.x == 0) won[blockIdx.x] = old == 0;
}"""
    tr, want, got = run_both(src, "claim", {}, {"owner": np.zeros(1, np.int64),
                                                "won": np.zeros(4, np.int32)}, ["4"], [1])
    assert "kport_atomic_cas((device atomic_int*)(owner), 0, (int) " in tr.body, tr.body
    # one block claims the word, whichever runs first: its number is there, and it alone won
    assert got["won"].sum() == want["won"].sum() == 1
    assert got["owner"][0] == np.flatnonzero(got["won"])[0] + 1
