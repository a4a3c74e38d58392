"""metal_sim's address-space checks (runners/metal_sim/spaces.py): the pass over written pointer
and reference types, the check unit's rewrites, and shims that take every space MSL allows.
The rules themselves are measured by tests/conformance/test_msl_rules.py."""

import mlx.core as mx
import numpy as np
import pytest

from runners import srcrewrite
from runners.cpplex import lex
from runners.metal_sim import MetalLibrary, metal_kernel, spaces
from runners.simhost import build_only


def missing(code: str) -> list[int]:
    toks = lex(code)[0]
    return [p.line for p in spaces.missing_space_problems(toks, "source.metal")]


@pytest.mark.parametrize("code", [
    "float* p = out;",
    "const float* src = inp;",
    "template <typename T> void f(const T* p) {}",
    "struct S { float* data; };",
    "typedef float* fptr;",
    "float& r = out[0];",
    "float x = *(const float *)((const char *) src0 + 4);",
    "auto v = static_cast<const float*>(raw);",
    "auto v = reinterpret_cast<const vec<float, 4>*>(raw);",
    "struct P { float a; }; void f(const P& p) {}",
])
def test_a_type_without_an_address_space_is_found(code):
    assert set(missing(code)) == {1}


@pytest.mark.parametrize("code", [
    "device float* p = out + i;",
    "const device float* c = (const device float*)((const device char*)inp + 4);",
    "thread float& x = acc[0];",
    "auto p = out + i; auto& r = out[i]; const auto* q = out;",
    "float y = a * b; int n = sizeof(float) * 4; uint m = x & 3u;",
    "float y = float(a) * b; bool z = a < b && c > d;",
    "template <typename T> void f(const device T* p, threadgroup T* t, thread T& r) {}",
    "device float* device* pp;",
    "struct V { V operator*(V o) const thread; };",
    "for (auto& x : arr) {}",
])
def test_qualified_and_non_type_uses_pass(code):
    assert missing(code) == []


def test_the_check_unit_rewrites_casts_storage_and_constant():
    text = spaces.check_text("constant float W[2] = {1, 2};\nvoid f(device float* out) {\n"
                             "threadgroup float tile[16];\n"
                             "auto p = (threadgroup float*)((device char*)out + 4);\n}\n")
    assert text.count("\n") == 5
    assert "__kp_ascast<threadgroup float*>((__kp_ascast<device char*>(out) + 4))" in text
    assert "using __kp_T_tile = threadgroup float[16]" in text
    assert "constant const float W" in text
    assert srcrewrite.mark_address_spaces("float f() const device;") == "float f() const       ;"


def build(source, header="", inputs=None, **kw):
    inputs = inputs or (np.arange(16, dtype=np.float32),)
    k = metal_kernel("sp", [f"in{i}" for i in range(len(inputs))], ["out"], source, header,
                     **kw)
    with build_only():
        return k.launch(inputs=[mx.array(x) for x in inputs], output_shapes=[(16,)],
                        output_dtypes=[mx.float32], grid=(16, 1, 1), threadgroup=(16, 1, 1))


def test_a_conversion_error_names_the_spaces_and_the_users_line():
    run = build("uint i = thread_position_in_grid.x;\nthreadgroup float t[16];\n"
                "device float* p = t;\nout[i] = p[i];")
    assert not run.compiled
    errors = [d for d in run.diagnostics if d.severity == "error"]
    assert [(d.file, d.line) for d in errors] == [("source.metal", 3)]
    assert "device float" in errors[0].message and "threadgroup float" in errors[0].message


def test_a_missing_space_reads_like_apples_error():
    run = build("float* p = out;\np[0] = in0[0];", header="")
    assert not run.compiled
    assert any(d.file == "source.metal" and d.line == 1 and "pointer type must have explicit "
               "address space qualifier" in d.message for d in run.diagnostics)


def test_shims_take_every_space_msl_allows():
    # atomics in device and threadgroup memory, simdgroup_load/store from both, and MLX's
    # elem_to_loc on its `constant` shape buffers
    source = """
uint i = thread_position_in_grid.x;
threadgroup atomic<int> counter[1];
threadgroup float tile[64];
if (i == 0) atomic_store_explicit(&counter[0], 0, memory_order_relaxed);
threadgroup_barrier(mem_flags::mem_threadgroup);
atomic_fetch_add_explicit(&counter[0], 1, memory_order_relaxed);
simdgroup_float8x8 m;
simdgroup_load(m, in0, 8);
simdgroup_store(m, tile, 8);
simdgroup_load(m, tile, 8);
threadgroup_barrier(mem_flags::mem_threadgroup);
out[i] = tile[i] + float(elem_to_loc(i, in0_shape, in0_strides, in0_ndim));
"""
    run = build(source, inputs=(np.arange(64, dtype=np.float32).reshape(8, 8),))
    assert run.compiled, [str(d) for d in run.diagnostics]


def test_a_library_kernel_is_checked_too():
    bad = ("kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]])"
           " {\n  threadgroup float t[4];\n  device float* p = t;\n  out[i] = p[0];\n}\n")
    fn = MetalLibrary(bad).function("k")
    with build_only():
        run = fn.launch({0: np.zeros(4, np.float32)}, grid=(4, 1, 1), threadgroup=(4, 1, 1))
    assert not run.compiled
    assert any(d.file == "kernel.metal" and d.line == 3 for d in run.diagnostics)


@pytest.mark.parametrize("code", [
    "void f(threadgroup thread float& r) {}",
    "void f(device constant float* p) {}",
    "void f(const device threadgroup float* p) {}",
])
def test_two_address_spaces_on_one_type_are_refused(code):
    """clang (Apple's compiler with it) rejects "multiple address spaces specified for type";
    metal_sim erases `thread` before its check unit, so the token pass must say it."""
    problems = spaces.missing_space_problems(lex(code)[0], "source.metal")
    assert [(p.line, "multiple address spaces" in p.message) for p in problems] == [(1, True)]


def test_a_pointer_to_a_pointer_may_name_a_space_per_level():
    assert missing("void f(device float* threadgroup* p) {}") == []


def test_the_check_reads_its_prelude_precompiled_and_a_refused_one_is_made_again(fresh_home):
    """The check's kport headers are precompiled once (simbuild.precompiled_prelude); what it
    finds is the same when clang refuses that header and it reads them itself."""
    from runners import simbuild
    from runners.settings import load_settings

    unit = (spaces.CHECK_DEFINE + "#include <kport/rt.h>\n#include <kport/metal_stdlib.h>\n"
            + spaces.CHECK_HEAD + '#line 1 "k.metal"\nvoid f(device float* x) {\n'
            "  threadgroup float* t = x;\n  int n = 3;\n  float a[n];\n}\n")
    settings = load_settings()

    def found() -> list[tuple[int, str]]:
        return [(d.line, d.message.split(":")[0][:40])
                for d in spaces.run_check(unit, {"k.metal"}, settings)]

    first = found()
    assert [line for line, _ in first] == [2, 4]  # the space conversion, the VLA
    pchs = list((fresh_home / "cache" / "build" / "pch").rglob(simbuild.PCH_FILE))
    assert len(pchs) == 1
    header = pchs[0].with_name("prelude.h")
    header.write_text(header.read_text() + "// changed\n")  # clang refuses the header now
    assert found() == first
    assert not pchs[0].exists()
    header.write_text(header.read_text().replace("// changed\n", ""))
    assert found() == first
    assert pchs[0].exists()  # made again
