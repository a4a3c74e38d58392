"""A kernel read where it sits, as nvcc reads it (issue 15): local headers from the file's folder
and each -I folder, `#pragma once`, the #if groups clang skips left out, host libraries that are
nowhere to be found read as empty; the translator and the guessed case work on the kernel's
device code, every TODO and diagnostic at the file and line it was written at."""

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from agent.translate import cuda_closure, translate_kernel
from agent.translate.macros import expand_unbalanced_macros
from runners.cuda_sim import RawKernel
from runners.cuda_sim.reading import line_origins, nvcc_options, read_as_compiled
from runners.srcrewrite import SourceError
from tests.cli import kport

COMMON = """\
#pragma once
#include <cublas_v2.h>
#include "base.h"
#define BLOCK 64
#if defined(USE_HIP)
static __device__ float twice(float x) { asm volatile("v_add_f32 %0, %1, %1" : "=v"(x)); }
#else
static __device__ float twice(float x) { return x + x; }
#endif
struct Handle { cublasHandle_t blas; };
static void host_setup(Handle & h) { cublasCreate(&h.blas); }
"""
BASE = """\
#pragma once
#include "common.cuh"
#define SCALE 3.0f
"""
KERNEL = """\
#include "common.cuh"
#include "common.cuh"

static __device__ float scaled(float x) { return twice(x) * SCALE; }

__global__ void scale_twice(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = scaled(x[i]) + KP_OFFSET;
    }
}

void launch(const float * x, float * y, int n, Handle & h) {
    host_setup(h);
    scale_twice<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, n);
}
"""


@pytest.fixture
def tree(tmp_path) -> Path:
    """src/ops/scale.cu includes common.cuh of include/, which includes base.h of src/ (found
    through -I src only), which includes common.cuh again (#pragma once)."""
    (tmp_path / "src" / "ops").mkdir(parents=True)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "common.cuh").write_text(COMMON)
    (tmp_path / "src" / "base.h").write_text(BASE)
    (tmp_path / "src" / "ops" / "scale.cu").write_text(KERNEL)
    return tmp_path


def _options(tree: Path, *defines: str) -> tuple[str, ...]:
    path = tree / "src" / "ops" / "scale.cu"
    return nvcc_options(path, [tree / "include", tree / "src"], defines)


def _read(tree: Path, *defines: str):
    path = tree / "src" / "ops" / "scale.cu"
    return read_as_compiled(path.read_text(), path.name, _options(tree, *defines))


def test_the_tree_is_read_as_nvcc_reads_it(tree):
    view = _read(tree, "KP_OFFSET=0.5f")
    assert set(view.files) == {"scale.cu", "common.cuh", "base.h"}
    assert view.stubbed == ["cublas_v2.h"]  # host library, nowhere here: read as empty
    assert "asm volatile" not in view.text  # the HIP branch clang skips
    assert view.text.count("return x + x;") == 1  # #pragma once: included once
    line = view.text.split("\n").index(
        "static __device__ float twice(float x) { return x + x; }")
    assert view.origin[line] == ("common.cuh", 8)
    assert view.where(line + 1) == "common.cuh:8"
    assert "#define SCALE 3.0f" in view.text  # macros stay as written, unexpanded
    assert "scaled(x[i]) + KP_OFFSET" in view.text


def test_a_define_decides_the_groups(tree):
    view = _read(tree, "USE_HIP", "KP_OFFSET=0")
    assert "asm volatile" in view.text and "return x + x;" not in view.text


def test_a_missing_local_header_names_its_line_and_the_flag(tree):
    path = tree / "src" / "ops" / "scale.cu"
    with pytest.raises(SourceError) as err:
        read_as_compiled(path.read_text(), path.name, nvcc_options(path, [tree / "include"]))
    assert "common.cuh:3" in str(err.value) and "'base.h' file not found" in str(err.value)
    assert "-I DIR" in str(err.value)


def test_an_error_directive_is_reported_where_it_is(tree):
    (tree / "src" / "base.h").write_text('#pragma once\n#error "needs CUDA 13"\n')
    with pytest.raises(SourceError, match=r"base.h:2.*needs CUDA 13"):
        _read(tree)


def test_the_device_code_closure_runs_as_the_kernel_does_in_its_tree(tree):
    view = _read(tree, "KP_OFFSET=0.5f")
    code = cuda_closure(view.text, "scale_twice", where="scale.cu", origin=view.origin)
    assert "host_setup" not in code and "cublas" not in code  # host code left out
    assert '#line 4 "scale.cu"' in code and '#line 8 "common.cuh"' in code
    origins = line_origins(code, "scale.cu")
    assert origins[code.split("\n").index("static __device__ float twice(float x) "
                                          "{ return x + x; }")] == ("common.cuh", 8)
    x = np.linspace(-2, 2, 200, dtype=np.float32)
    y = np.zeros_like(x)
    run = RawKernel(code, "scale_twice", ("-DKP_OFFSET=0.5f",), filename="scale.device.cu"
                    ).launch((4, 1, 1), (64, 1, 1), [x, y, np.int32(200)])
    assert run.ok, [str(d) for d in run.diagnostics] + [str(f) for f in run.findings]
    np.testing.assert_allclose(y, 6 * x + 0.5, rtol=1e-6)


def test_translate_reads_the_tree_and_names_each_todos_file(tree):
    (tree / "include" / "common.cuh").write_text(COMMON.replace(
        "return x + x; }", "__nanosleep(10); return x + x; }"))
    path = tree / "src" / "ops" / "scale.cu"
    proc = kport("translate", str(path), "--kernel", "scale_twice", "-I", str(tree / "include"),
               "-I", str(tree / "src"), "-D", "KP_OFFSET=0.5f", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert "twice" in out["header"] and "SCALE" in out["header"]
    assert [(t["file"], t["line"], t["construct"]) for t in out["todos"]] == [
        ("common.cuh", 8, "__nanosleep")]
    assert any("<cublas_v2.h>" in n for n in out["notes"])
    proc = kport("translate", str(path), "--kernel", "scale_twice", "-I", str(tree / "include"))
    assert proc.returncode == 2
    assert "common.cuh:3" in proc.stderr and "-I DIR" in proc.stderr


def test_unbalanced_table_macros_are_read_as_their_bodies():
    src = textwrap.dedent("""\
        #define TABLE_BEGIN(type, name, size) static const __device__ type name[size] = {
        #define TABLE_END() };
        TABLE_BEGIN(int, lut, 4)
            1, 2, 3, 4,
        TABLE_END()
        #define LANES 32
        template <int width = LANES> __device__ int pick(int i) { return lut[i % 4] * width; }
        __global__ void k(int * y) { y[threadIdx.x] = pick(threadIdx.x); }
        """)
    assert "static const __device__ int lut[4] = {" in expand_unbalanced_macros(src)
    tr = translate_kernel(src, "k")
    assert "lut[4]" in tr.header  # the table, no longer swallowed with what follows it
    assert "#define LANES 32" in tr.header  # used only in a template's default argument


def test_partial_specialisations_come_with_their_primary_template():
    src = textwrap.dedent("""\
        enum class op { SUM, MAX };
        template <op o, typename T> struct policy;
        template <typename T> struct policy<op::SUM, T> {
            static __device__ T reduce(T a, T b) { return a + b; }
        };
        template <typename T> struct policy<op::MAX, T> {
            static __device__ T reduce(T a, T b) { return a > b ? a : b; }
        };
        __global__ void k(const float * x, float * y) {
            y[0] = policy<op::SUM, float>::reduce(x[0], x[1]);
        }
        """)
    tr = translate_kernel(src, "k")
    assert tr.header.count("struct policy") == 3


def test_kb_rules_reads_the_tree_and_skips_what_the_build_skips(tree):
    """`kport kb rules` takes -I/-D like translate and port: the kernel's helpers are found in
    the header they are in, and the HIP branch's inline asm (an #if group a CUDA build skips)
    is no hit."""
    path = tree / "src" / "ops" / "scale.cu"
    proc = kport("kb", "rules", str(path), "--kernel", "scale_twice", "-I",
                 str(tree / "include"), "-I", str(tree / "src"), "-D", "KP_OFFSET=0.5f",
                 "--json")
    assert proc.returncode == 0, proc.stderr
    hits = {h["rule_id"]: h for h in json.loads(proc.stdout)}
    assert "common.cuh:8" in hits["memory.device_function"]["where"]  # twice(), in a header
    assert 4 in hits["memory.device_function"]["lines"]  # scaled(), in the file itself
    assert not any("asm" in h["cuda"] for h in hits.values())
    missing = kport("kb", "rules", str(path), "--kernel", "scale_twice")
    assert missing.returncode != 0 and "-I" in missing.stderr + missing.stdout
