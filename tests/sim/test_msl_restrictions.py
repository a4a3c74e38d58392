"""MSL's restrictions on C++ (runners/metal_sim/restrictions.py) and on threadgroup
declarations (srcrewrite.group_storage_problems): each rule fires where MSL forbids the construct
and stays quiet on the legal spellings next to it. The conformance suite
(tests/conformance/msl_rules) holds one snippet per rule; these cover the near-misses that a
token-level reading could confuse."""

import numpy as np
import pytest

from runners import srcrewrite
from runners.cpplex import lex
from runners.metal_sim import MetalLibrary, metal_kernel, restrictions
from runners.metal_sim.allowlist import source_problems


def found(code: str, whole_file: bool = False) -> list[tuple[int, str]]:
    return [(p.line, p.check) for p in restrictions.problems(lex(code)[0], "k.metal",
                                                             whole_file=whole_file)]


@pytest.mark.parametrize("code, line", [
    ("float a;\ndouble d = a;", 2),
    ("long double d;", 1),
    ("long long n;", 1),
    ("unsigned long long n;", 1),
    ("auto f = [](float x) { return x; };", 1),
    ("float y = g([&](int i) { return i; });", 1),
    ("return\n[=]() { return 1; }();", 2),
    ("bool b = noexcept(f());", 1),
    ("int main() { return 0; }", 1),
    ("atomic_fetch_add_explicit(p, 1,\n  memory_order_seq_cst);", 2),
    ("atomic_exchange_explicit(p, 1, memory_order_acq_rel);", 1),
])
def test_each_restriction_fires_at_its_line(code, line):
    assert [ln for ln, _ in found(code)] == [line]


@pytest.mark.parametrize("code", [
    "long n = 1; ulong m = 2; long2 v;",
    "int64_t a; uint64_t b; long x = long(1);",
    "float t[4][4]; t[1][2] = a[i][j];",
    "[[kernel]] void k(device float* y [[buffer(0)]]) {}",
    "float operator[](int i) const { return v[i]; } x = obj.operator[](1);",
    "float f(int i) noexcept { return 0; }",
    "float g() const noexcept(true) { return 0; }",
    "int main_count = 0; int domain(int x); q = s.main(1);",
    "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);",
    "atomic_fetch_add_explicit(p, 1, memory_order_relaxed); f(memory_order_seq_cst);",
    "using V = float[4]; decltype(x)[2]; p = (float*)q;",
])
def test_legal_spellings_pass(code):
    assert found(code) == []


def test_kernels_overloaded_or_with_thread_arguments_in_a_library():
    lib = ("kernel void k(device float* y [[buffer(0)]]) {}\n"
           "kernel void j(thread float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {}\n"
           "kernel void k(device int* y [[buffer(0)]]) {}\n")
    assert found(lib, whole_file=True) == [(2, "address-space"), (3, "kernel")]
    assert found(lib, whole_file=False) == []  # an MLX body or header declares no kernels


@pytest.mark.parametrize("code, body, line, words", [
    ("threadgroup float s[4] = {0};", True, 1, "initializer"),
    ("uint i = 0;\nthreadgroup int n = 0;", True, 2, "initializer"),
    ("threadgroup float s[];", True, 1, "explicit size"),
    ("threadgroup float tile[16];\ninline void f() {}", False, 1, "program scope"),
    ("inline float f(float v) {\n  threadgroup float b[4];\n  return v;\n}", False, 2,
     "non-kernel"),
])
def test_threadgroup_declarations_msl_forbids(code, body, line, words):
    (got,) = srcrewrite.group_storage_problems(code, body=body)
    assert got[0] == line and words in got[1]


@pytest.mark.parametrize("code, body", [
    ("threadgroup float s[4];\nthreadgroup float* p = s;", True),
    ("inline float f(threadgroup float* t, uint i) {\n  threadgroup float* q = t + i;\n"
     "  return *q;\n}", False),
    ("kernel void k(device float* y [[buffer(0)]]) {\n  threadgroup float s[8];\n}", False),
    ("[[kernel]] void k(device float* y [[buffer(0)]]) {\n  if (1) { threadgroup int n; }\n}",
     False),
    ("struct A { float x; };\nconstant float table[2] = {1, 2};", False),
])
def test_legal_threadgroup_declarations(code, body):
    assert srcrewrite.group_storage_problems(code, body=body) == []


def test_refusals_are_compile_errors_at_the_users_line():
    k = metal_kernel("k", ["inp"], ["out"], "uint i = thread_position_in_grid.x;\n"
                     "long long n = i;\nout[i] = inp[i] + float(n);")
    run = k.launch(inputs=[np.ones(4, np.float32)], output_shapes=[(4,)],
                   output_dtypes=[np.float32], grid=(4, 1, 1), threadgroup=(4, 1, 1))
    assert not run.compiled
    assert [(d.file, d.line) for d in run.diagnostics] == [("source.metal", 2)]
    lib = MetalLibrary("#include <metal_stdlib>\nusing namespace metal;\n"
                       "kernel void k(device float* y [[buffer(0)]],\n"
                       "              uint i [[thread_position_in_grid]]) {\n"
                       "  threadgroup float s[2] = {1, 2};\n  y[i] = s[0];\n}\n", "lib.metal")
    run = lib.function("k").launch({0: np.zeros(2, np.float32)}, grid=(2, 1, 1),
                                   threadgroup=(2, 1, 1))
    assert not run.compiled and [(d.file, d.line) for d in run.diagnostics] == [("lib.metal", 5)]


def test_the_legal_neighbours_compile_and_run():
    header = ("struct Acc {\n  float v[2];\n  float operator[](int i) const thread { return v[i]; }"
              "\n};\ninline float pick(threadgroup float* t, uint i) noexcept {\n"
              "  threadgroup float* q = t + i;\n  return *q;\n}\n")
    body = ("uint i = thread_position_in_grid.x;\nthreadgroup float s[4];\ns[i] = inp[i];\n"
            "threadgroup_barrier(mem_flags::mem_threadgroup);\nlong n = long(i);\n"
            "Acc a;\na.v[0] = 1.0f;\na.v[1] = 2.0f;\n"
            "out[i] = pick(s, 3 - i) + a[1] + float(n);")
    k = metal_kernel("near", ["inp"], ["out"], body, header)
    run = k.launch(inputs=[np.arange(4, dtype=np.float32) * 10], output_shapes=[(4,)],
                   output_dtypes=[np.float32], grid=(4, 1, 1), threadgroup=(4, 1, 1))
    assert run.compiled, run.diagnostics
    np.testing.assert_array_equal(np.array(run.outputs[0]), [32, 23, 14, 5])


def test_expert_library_idioms_compile():
    # each was refused before ggml-metal's sources were tried (tests/conformance/
    # test_expert_kernels.py): a typedef'd struct, an explicit specialization, a constexpr
    # constant static table, and a loop after a _Pragma (clang -E re-enters the file there)
    src = """#include <metal_stdlib>
using namespace metal;
#define FOR_UNROLL(x) _Pragma("clang loop unroll(full)") for (x)
typedef struct { float scale; } args_t;
template <typename T> inline T twice(T x) { return x + x; }
template <> inline float2 twice<float2>(float2 x) { float2 r; r[0] = x[0] * 2; r[1] = x[1] * 2;
  return r; }
constexpr constant static float table[2] = {1.0f, 10.0f};
kernel void k(constant args_t & args [[buffer(0)]], device float* y [[buffer(1)]],
              uint i [[thread_position_in_grid]]) {
  float s = 0.0f;
  FOR_UNROLL (int j = 0; j < 2; ++j) {
    s += table[j];
  }
  y[i] = twice(s) * args.scale + twice(float2(1.0f, 2.0f))[1];
}
"""
    y = np.zeros(2, np.float32)
    run = MetalLibrary(src, "idioms.metal").function("k").launch(
        {0: np.array([0.5], np.float32), 1: y}, grid=(2, 1, 1), threadgroup=(2, 1, 1))
    assert run.compiled, run.diagnostics
    np.testing.assert_array_equal(y, [15.0, 15.0])


@pytest.mark.parametrize("code, flagged", [
    ("int kernel = 3;\ny[0] = kernel;", ["kernel"]),
    ("float half;", ["half"]),
    ("T vertex[4];", ["vertex"]),
    ("void fragment(int a) {}", ["fragment"]),
    ("int uint = 1;", ["uint"]),
    ("float * device;", ["device"]),
    ("template <typename T> T f(T half);", ["half"]),
    # the words as Metal uses them
    ("half h = half(x);\ny = (half)z;", []),
    ("device float* p = x;\nconstant half kS = 1;", []),
    ("return half(x);", []),
    ("uint i = 0;\nvec<half, 4> v;\nout[i] = 2u * uint(v.x) + static_cast<uint>(i);", []),
])
def test_a_metal_keyword_declared_as_a_name_is_refused(code, flagged):
    """Apple's compiler rejects `int kernel = 3;` or a parameter named `half`; metal_sim's C++
    shims would take them, so a port that does so must not be accepted."""
    got = [p.message.split("`")[1] for p in source_problems(code, "source.metal", body=True)
           if p.check == "keyword"]
    assert got == flagged
