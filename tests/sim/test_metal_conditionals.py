"""What the compiler skips is not refused, what it reads is (runners/conditionals.py),
and the other constructs llama.cpp's ggml-metal kernels showed metal_sim refusing although
Apple's compiler builds them: function constants, tests of predefined macros for being
defined, GNU range designators, function pointers as template parameters, address spaces in
macro bodies, casts of casts, device matrices cast to another element type."""

import numpy as np
import pytest

from runners import conditionals
from runners.metal_sim import MetalLibrary

HEAD = "#include <metal_stdlib>\nusing namespace metal;\n"
KERNEL = """
kernel void copy(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
  y[i] = x[i] * SCALE;
}
"""


def built(source: str):
    return MetalLibrary(HEAD + source, "lib.metal").build()


def errors(run) -> str:
    return "\n".join(str(d) for d in run.diagnostics if d.severity == "error")


# --- #if groups -------------------------------------------------------------------------------

SKIPPED = {
    "another platform's include": "#if defined(__CUDACC__)\n#include <cuda_fp16.h>\n#endif",
    "a reserved name": "#ifdef NOT_DEFINED\nstatic int __device_x = 1;\n#endif",
    "a #line": "#if 0\n#line 1 \"other.h\"\n#endif",
    "a taken #if's #elif": "#if 1\n#define OK 1\n#elif defined(__x86_64__)\n#endif",
    "an #else after a taken branch": "#ifndef FOO\n#define OK 1\n#else\n#include <cstdint>\n#endif",
    "a nested skipped group": "#if 1\n#if 0\nasm(\"nop\");\n#endif\n#endif",
}


@pytest.mark.parametrize("what", sorted(SKIPPED))
def test_what_the_compiler_skips_is_not_refused(what):
    run = built(SKIPPED[what] + "\n#define SCALE 2.0f\n" + KERNEL)
    assert run.compiled, errors(run)


READ = {
    "a live group's include": ("#if 1\n#include <cstdint>\n#endif", "[include]"),
    "a live #else": ("#if 0\n#else\nstatic int __x = 1;\n#endif", "[reserved-name]"),
    "an evaluated #elif": ("#if 0\n#elif defined(__x86_64__)\n#endif", "[reserved-name]"),
    "a value read of __cplusplus": ("#if __cplusplus > 201402L\n#endif", "[reserved-name]"),
    "a group opened by a macro's value": ("#define ON 1\n#if ON\nasm(\"nop\");\n#endif",
                                          "[keyword]"),
}


@pytest.mark.parametrize("what", sorted(READ))
def test_what_the_compiler_reads_is_refused_at_its_line(what):
    text, check = READ[what]
    run = built(text + "\n#define SCALE 2.0f\n" + KERNEL)
    assert not run.compiled
    line = next(n for n, ln in enumerate((HEAD + text).split("\n"), 1)
                if any(w in ln for w in ("include <c", "__x", "__cplusplus", "asm")))
    assert any(check in d.message and d.line == line for d in run.diagnostics), errors(run)


def test_a_group_inside_a_macros_arguments_fails_the_build():
    """A marker inside macro arguments could be swallowed by the expansion; clang refuses a
    pragma there, so the build fails instead of a finding being dropped."""
    text = ("#define EAT(x)\nEAT(\n#if 1\nint __hidden;\n#endif\n)\n#define SCALE 2.0f\n"
            + KERNEL)
    run = built(text)
    assert not run.compiled
    assert "__hidden" in errors(run) or "macro arguments" in errors(run), errors(run)


def test_lines_after_skipped_groups_keep_their_numbers():
    """Each skipped group drops its marker and #line: the #line after its #endif puts the
    numbering back, so a later finding names its own line."""
    text = "".join(f"#if 0\n#include <x{k}.h>\n#endif\n" for k in range(5)) + \
        "#define SCALE 2.0f\nstatic int __late = 0;\n" + KERNEL
    run = built(text)
    line = (HEAD + text).split("\n").index("static int __late = 0;") + 1
    assert not run.compiled
    assert [d.line for d in run.diagnostics if "__late" in d.message] == [line], errors(run)


def test_a_source_cannot_spell_its_own_marker():
    """Markers carry a digest of the source: one written into the source names another key,
    and its pragma is refused."""
    text = "#if 1\n#pragma kport_live 0123456789abcdef 0\n#endif\n"
    run = built(text + "#define SCALE 2.0f\n" + KERNEL)
    assert not run.compiled and "[pragma]" in errors(run)


def test_groups_are_found_as_clang_reads_the_directives():
    text = "#if A \\\n  && B\nx\n#elif C\ny\n#else\nz\n#endif\n"
    groups = conditionals.find_groups(text)
    assert [(g.first, g.last, g.earlier) for g in groups.groups] == [
        (3, 3, ()), (5, 5, (0,)), (7, 7, (0, 1))]
    assert groups.elif_lines == {4: 1}
    assert groups.endif_ends == [8]


@pytest.mark.parametrize("test", ["#ifdef __cplusplus", "#ifndef _MSC_VER",
                                  "#if defined(__CUDA_ARCH__) || defined __HIPCC__",
                                  "#if __METAL_VERSION__ >= 310"])
def test_predefined_macros_may_be_tested_as_apple_defines_them(test):
    run = built(f"{test}\n#endif\n#define SCALE 2.0f\n" + KERNEL)
    assert run.compiled, errors(run)


# --- function constants -----------------------------------------------------------------------

FC = HEAD + """
#define FC_BASE 100
constant float fc_scale [[function_constant(FC_BASE + 0)]];
constant bool  fc_add   [[function_constant(FC_BASE + 1)]];
constant int32_t fc_off [[function_constant(FC_BASE + 2)]];

kernel void affine(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                   uint i [[thread_position_in_grid]]) {
  float v = x[i] * fc_scale;
  if (fc_add) v += fc_off;
  y[i] = is_function_constant_defined(fc_off) ? v : -1.0f;
}
"""


def test_function_constants_compile_without_values_and_run_with_them():
    lib = MetalLibrary(FC, "fc.metal")
    assert lib.build().compiled
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    run = lib.function("affine", constants={"fc_scale": 3.0, 101: True, "fc_off": 5}).launch(
        {0: x, 1: y}, grid=(8, 1, 1), threadgroup=(8, 1, 1))
    assert run.ok, run.findings or run.diagnostics
    np.testing.assert_array_equal(y, x * 3 + 5)
    y[:] = 0
    run = lib.function("affine", constants={"fc_scale": 2.0, "fc_add": False}).launch(
        {0: x, 1: y}, grid=(8, 1, 1), threadgroup=(8, 1, 1))
    assert run.ok, run.findings or run.diagnostics
    np.testing.assert_array_equal(y, -1.0)  # fc_off not given: is_function_constant_defined


def test_reading_a_function_constant_without_a_value_stops_the_launch_at_its_line():
    lib = MetalLibrary(FC, "fc.metal")
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    run = lib.function("affine", constants={"fc_add": False}).launch(
        {0: x, 1: y}, grid=(8, 1, 1), threadgroup=(8, 1, 1))
    assert not run.ok
    line = FC.split("\n").index("  float v = x[i] * fc_scale;") + 1
    assert any("function constant" in f.message and f.line == line for f in run.findings), \
        run.findings


def test_an_unknown_function_constant_name_is_refused_naming_the_declared_ones():
    with pytest.raises(ValueError, match="fc_scale"):
        MetalLibrary(FC, "fc.metal").function("affine", constants={"fc_scal": 1.0})


# --- other forms Apple's compiler builds --------------------------------------------------------

def test_gnu_range_designators_are_no_lambdas():
    run = built("#define SCALE 2.0f\n" + KERNEL.replace(
        "y[i] = x[i] * SCALE;", "float t[4] = { [0 ... 3] = 1.0f };\n  y[i] = x[i] * t[i % 4];"))
    assert run.compiled, errors(run)


def test_function_pointers_as_template_parameters_but_no_others():
    ok = HEAD + """
void twice(thread float& v) { v *= 2; }
template <void (*op)(thread float&)>
kernel void apply(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float v = y[i]; op(v); y[i] = v;
}
template [[host_name("apply_twice")]] kernel void apply<twice>(device float*, uint);
"""
    lib = MetalLibrary(ok, "fp.metal")
    y = np.arange(4, dtype=np.float32)
    run = lib.function("apply_twice").launch({0: y}, grid=(4, 1, 1), threadgroup=(4, 1, 1))
    assert run.ok, run.findings or run.diagnostics
    np.testing.assert_array_equal(y, np.arange(4) * 2)
    bad = ok.replace("float v = y[i]; op(v);", "void (*f)(thread float&) = op; float v = y[i]; "
                     "f(v);")
    assert "[function-pointer]" in errors(MetalLibrary(bad, "fp.metal").build())


def test_address_spaces_in_a_macro_body_and_casts_inside_casts():
    source = HEAD + """
#define TABLE(name) static const constant float name[4] = {
TABLE(weights) 1.0f, 2.0f, 3.0f, 4.0f };
kernel void k(device const packed_char4* q [[buffer(0)]], device half4* y [[buffer(1)]],
              device const float2x4* m [[buffer(2)]], device half2x4* hm [[buffer(3)]],
              uint i [[thread_position_in_grid]]) {
  y[i] = (half4) (float4(q[i]) * weights[i % 4]);
  hm[i] = (half2x4)(*((device const float2x4*) m + i));
}
"""
    q = np.array([[1, -2, 3, -4]] * 2, np.int8)
    y = np.zeros((2, 4), np.float16)
    m = np.arange(16, dtype=np.float32).reshape(2, 2, 4)
    hm = np.zeros((2, 2, 4), np.float16)
    run = MetalLibrary(source, "m.metal").function("k").launch(
        {0: q, 1: y, 2: m, 3: hm}, grid=(2, 1, 1), threadgroup=(2, 1, 1))
    assert run.ok, run.findings or run.diagnostics
    np.testing.assert_array_equal(y, q.astype(np.float32) * np.array([[1], [2]], np.float32))
    np.testing.assert_array_equal(hm, m.astype(np.float16))


def test_a_product_with_a_name_that_is_also_a_type_is_no_pointer():
    source = HEAD + """
template <typename T> T first(T a) { return a; }
kernel void k(device float* y [[buffer(0)]], constant uint& T [[buffer(1)]],
              uint i [[thread_position_in_grid]]) {
  y[T * i] = first(1.0f) + T * 2;
}
"""
    assert MetalLibrary(source, "p.metal").build().compiled


def test_half_and_bfloat_vectors_convert_through_float():
    """clang's x86 back end crashes converting a __bf16 vector straight to _Float16; the shim
    goes lane by lane through float, as Metal's value conversion rounds."""
    source = HEAD + """
kernel void k(device const bfloat4* b [[buffer(0)]], device half4* h [[buffer(1)]],
              device bfloat4* back [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  h[i] = (half4) b[i];
  back[i] = bfloat4(h[i]);
}
"""
    values = np.array([[1.5, -2.25, 1024.0, 0.0078125]], np.float32)
    b = (values.view(np.uint32) >> 16).astype(np.uint16)  # exact in bfloat
    h, back = np.zeros((1, 4), np.float16), np.zeros((1, 4), np.uint16)
    run = MetalLibrary(source, "bh.metal").function("k").launch(
        {0: b, 1: h, 2: back}, grid=(1, 1, 1), threadgroup=(1, 1, 1))
    assert run.ok, run.findings or run.diagnostics
    np.testing.assert_array_equal(h, values.astype(np.float16))
    np.testing.assert_array_equal(back, b)


def test_a_member_functions_threadgroup_qualifier_is_no_storage():
    """MLX's complex_t declares `complex_t() threadgroup : ...`: an address-space qualifier
    of the object, not a threadgroup variable at program scope."""
    from runners import srcrewrite

    text = ("struct C {\n  float v;\n  C() thread : v(0) {}\n  C() threadgroup : v(0) {}\n"
            "  float get() const threadgroup { return v; }\n};\n")
    assert srcrewrite.group_storage_problems(text, body=False) == []
    assert srcrewrite.group_storage_problems("threadgroup float t[4];\n", body=False)
