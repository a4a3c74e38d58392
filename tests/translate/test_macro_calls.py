"""Issue 15 (probe 17): a user's function-like macro that wraps a CUDA builtin (vLLM's
``VLLM_LDG(arg) __ldg(arg)``) is expanded where it is used, so the builtin is translated there;
the port runs like the CUDA kernel in the simulators."""

import numpy as np

from agent.translate import translate_kernel
from agent.translate.macro_calls import expand_macro_calls

from .test_translate import run_both

# in the style of vLLM's cuda_compat.h and activation kernels (a macro over a builtin, one
# over that macro, a use over two lines, a warp shuffle behind a macro)
LOADS = """
#define KP_LDG(arg) __ldg(arg)
#define KP_TWICE(p) (2.0f * KP_LDG(p))
#define KP_SHFL_XOR(var, mask) __shfl_xor_sync(0xffffffffu, var, mask)
#define CEIL(a, b) (((a) + (b) - 1) / (b))
template <typename T>
__device__ __forceinline__ T gated(const T* __restrict__ p, int i, int d) {
  return KP_LDG(p + i) * KP_LDG(&p[i + d]);
}
__global__ void act(float* __restrict__ out, const float* __restrict__ in, const int d) {
  const int row = blockIdx.x;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float v = gated(in + row * 2 * d, i, d) + KP_TWICE(in +
                                                        row * 2 * d + i);
    v += KP_SHFL_XOR(v, 1) * (float) CEIL(d, 32);
    out[row * d + i] = v;
  }
}
"""


def test_a_macro_over_a_builtin_is_expanded_where_it_is_used_and_runs():
    d, rows = 64, 3
    x = np.random.default_rng(5).standard_normal(rows * 2 * d).astype(np.float32)
    tr, want, got = run_both(LOADS, "act", {"in": x, "d": np.int32(d)},
                             {"out": np.zeros(rows * d, np.float32)}, [str(rows)], [32])
    assert tr.todos == [] and tr.outputs == ["out"]
    assert "KP_LDG" not in tr.header + tr.body and "KP_SHFL_XOR" not in tr.body
    assert "#define CEIL(a, b)" in tr.header  # a macro naming no CUDA stays the user's
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5, atol=1e-5)


def test_expansion_keeps_lines_and_follows_the_preprocessor():
    src = LOADS + "// KP_LDG(x) in a comment\nconst char* s = \"KP_LDG(y)\";\n"
    out = expand_macro_calls(src)
    assert out.count("\n") == src.count("\n")
    assert "(2.0f * __ldg(in + row * 2 * d + i))\n" in out  # the arguments' line break after
    assert "// KP_LDG(x) in a comment" in out and '"KP_LDG(y)"' in out
    assert "#define KP_TWICE(p) (2.0f * KP_LDG(p))" in out  # directives are left alone
    # the preprocessor splits arguments at parentheses only, and a variadic macro takes the rest
    var = "#define KP_CALL(f, ...) __nv_call(f, __VA_ARGS__)\nint y = KP_CALL(g, a[1], (b, c));"
    assert expand_macro_calls(var).endswith("int y = __nv_call(g, a[1], (b, c));")


def test_a_macro_it_cannot_expand_keeps_its_counted_todo():
    # KP_READ names KP_LDG without calling it: only the preprocessor's rescan could expand it
    src = LOADS.replace("#define CEIL", "#define KP_READ KP_LDG\n#define CEIL").replace(
        "gated(in + row * 2 * d, i, d)", "KP_READ(&in[i])")
    tr = translate_kernel(src, "act", grid=["3"], block=[32])
    assert [t.construct for t in tr.todos] == ["__ldg"]
    assert "__ldg behind a macro" in tr.header
