"""cuda_sim reports: device printf, failing device asserts, compile errors at the user's line,
and constructs the simulator cannot model rejected by name and line."""

import numpy as np
import pytest

from runners.cuda_sim import CompileError, KernelFault, RawKernel
from runners.srcrewrite import SourceError

PRINTF_CODE = r"""
extern "C" __global__ void say(const float* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  printf("b%d t%d x=%.3f hex=%x s=%s ll=%lld\n", (int)blockIdx.x, (int)threadIdx.x, x[i],
         (unsigned)(i * 4096 + 255), i % 2 ? "odd" : "even", 1LL << (33 + i));
}
"""


def _printf_lines(x: np.ndarray, blocks: int, threads: int) -> list[str]:
    lines = []
    for b in range(blocks):
        for t in range(threads):
            i = b * threads + t
            parity = "odd" if i % 2 else "even"
            lines.append(f"b{b} t{t} x={x[i]:.3f} hex={i * 4096 + 255:x} s={parity} "
                         f"ll={1 << (33 + i)}")
    return lines


def test_printf_is_captured_in_the_run_record():
    x = (np.arange(6, dtype=np.float32) - 2.5) / 4
    run = RawKernel(PRINTF_CODE, "say").launch((2,), (3,), (x,))
    assert run.ok
    # Lines from different threads may interleave in any order on a GPU; each must be whole.
    assert sorted(run.printf.splitlines()) == sorted(_printf_lines(x, 2, 3))


def test_printf_reaches_stdout_when_called(capsys):
    x = np.full(4, 1.25, dtype=np.float32)
    RawKernel(PRINTF_CODE, "say")((1,), (4,), (x,))
    assert sorted(capsys.readouterr().out.splitlines()) == sorted(_printf_lines(x, 1, 4))


ASSERT_CODE = r"""
extern "C" __global__ void check(const int* v, int* out) {
  int i = threadIdx.x;
  assert(v[i] >= 0);
  out[i] = v[i];
}
"""


def test_passing_assert_is_silent():
    v = np.arange(8, dtype=np.int32)
    out = np.zeros_like(v)
    RawKernel(ASSERT_CODE, "check")((1,), (8,), (v, out))
    np.testing.assert_array_equal(out, v)


@pytest.mark.parametrize("header", ["", "#include <assert.h>", "#include <cassert>"])
def test_failing_assert_is_reported_with_its_line(header):
    v = np.arange(8, dtype=np.int32)
    v[5] = -1
    with pytest.raises(KernelFault) as info:  # the header goes on the code's empty first line
        RawKernel(header + ASSERT_CODE, "check")((1,), (8,), (v, np.zeros_like(v)))
    findings = info.value.findings
    assert findings and findings[0].line == 4
    assert "v[i] >= 0" in findings[0].message
    assert findings[0].thread == (5, 0, 0)


def test_trap_is_reported_with_the_faulting_thread():
    code = r"""
    extern "C" __global__ void stop(int* v) {
      if (threadIdx.x == 3 && blockIdx.x == 1) __trap();
      v[blockIdx.x * blockDim.x + threadIdx.x] = 1;
    }"""
    run = RawKernel(code, "stop").launch((2,), (4,), (np.zeros(8, dtype=np.int32),))
    assert run.compiled and not run.ok
    trap = run.findings[0]
    assert "__trap" in trap.message and (trap.file, trap.line) == ("kernel.cu", 3)
    assert trap.thread == (3, 0, 0) and trap.group == (1, 0, 0)


def test_faults_raised_inside_shim_helpers_name_the_user_line():
    code = r"""
    extern "C" __global__ void bad(int* v) {
      int lane = threadIdx.x;
      if (lane < 16) v[lane] = __shfl_sync(0xffffu, 1, lane + 16);
    }"""
    run = RawKernel(code, "bad").launch((1,), (32,), (np.zeros(32, dtype=np.int32),))
    assert [(f.file, f.line) for f in run.findings] == [("kernel.cu", 4)]


def test_out_of_bounds_global_write_is_reported():
    code = r"""
    extern "C" __global__ void spill(float* out) {
      out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
    }"""
    out = np.zeros(60, dtype=np.float32)
    run = RawKernel(code, "spill").launch((2,), (32,), (out,))
    assert run.compiled and not run.ok
    oob = run.findings[0]
    assert oob.kind == "out_of_bounds" and (oob.file, oob.line) == ("kernel.cu", 3)
    assert oob.group == (1, 0, 0) and oob.thread[0] >= 28
    np.testing.assert_array_equal(out, np.ones(60))


def test_compile_error_names_the_file_and_user_line():
    code = "extern \"C\" __global__ void broken(float* y) {\n  int i = threadIdx.x;\n" \
           "  y[i] = not_declared + 1.0f;\n}\n"
    kernel = RawKernel(code, "broken")
    with pytest.raises(CompileError) as info:
        kernel((1,), (4,), (np.zeros(4, dtype=np.float32),))
    errors = [d for d in info.value.diagnostics if d.severity == "error"]
    assert errors and (errors[0].file, errors[0].line) == ("kernel.cu", 3)
    assert "not_declared" in errors[0].message
    assert "kernel.cu:3" in str(info.value)


def test_compile_error_as_a_record_with_custom_filename():
    code = "__global__ void k(int* v) {\n  v[0] = 1\n}\n"
    run = RawKernel(code, "k", filename="mine.cu").launch((1,), (1,), (np.zeros(1, np.int32),))
    assert not run.compiled and not run.ok
    errors = [d for d in run.diagnostics if d.severity == "error"]
    assert (errors[0].file, errors[0].line) == ("mine.cu", 2) and "';'" in errors[0].message


def test_compile_error_inside_an_included_header(tmp_path):
    (tmp_path / "helpers.cuh").write_text("__device__ int f(int v) {\n  return v +;\n}\n")
    code = '#include "helpers.cuh"\n__global__ void k(int* v) { v[0] = f(1); }\n'
    run = RawKernel(code, "k", options=(f"-I{tmp_path}",)).launch((1,), (1,),
                                                                  (np.zeros(1, np.int32),))
    assert not run.compiled
    errors = [d for d in run.diagnostics if d.severity == "error"]
    assert (errors[0].file, errors[0].line) == ("helpers.cuh", 2)


def test_compile_error_after_an_include_keeps_the_user_line(tmp_path):
    (tmp_path / "helpers.cuh").write_text("#pragma once\n__device__ int f(int v) { return v; }\n"
                                          "// a second line\n")
    code = '#include "helpers.cuh"\n\n__global__ void k(int* v) {\n  v[0] = g(1);\n}\n'
    run = RawKernel(code, "k", options=(f"-I{tmp_path}",)).launch((1,), (1,),
                                                                  (np.zeros(1, np.int32),))
    errors = [d for d in run.diagnostics if d.severity == "error"]
    assert (errors[0].file, errors[0].line) == ("kernel.cu", 4)


UNSUPPORTED = {
    # PTX kport does not lower (runners/ptx.py; tests/sim/test_cuda_ptx.py has what it does)
    "inline PTX": ("mma.sync", r"""
extern "C" __global__ void k(int* y) {
  float d0, d1, d2, d3; unsigned a0 = 0, b0 = 0;
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%4}, "
               "{%5}, {%0,%1,%2,%3};"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(b0));
  y[threadIdx.x] = (int)d0;
}"""),
    "texture object": ("tex1Dfetch", r"""
extern "C" __global__ void k(int* y) {
  int i = threadIdx.x; unsigned long long tex = 0;
  y[i] = (int)tex1Dfetch<float>(tex, i);
}"""),
    "async copy": ("__pipeline_memcpy_async", r"""
extern "C" __global__ void k(int* y) {
  __shared__ int s[32];
  __pipeline_memcpy_async(&s[threadIdx.x], &y[threadIdx.x], sizeof(int));
  __pipeline_commit();
}"""),
    "grid sync": ("this_grid", r"""#include <cooperative_groups.h>
extern "C" __global__ void k(int* y) {
  y[threadIdx.x] = 1;
  cooperative_groups::this_grid().sync();
}"""),
}


@pytest.mark.parametrize("construct", sorted(UNSUPPORTED))
def test_unsupported_construct_named_with_its_line(construct):
    token, code = UNSUPPORTED[construct]
    kernel = RawKernel(code, "k")
    with pytest.raises(SourceError) as info:
        kernel.launch((1,), (32,), (np.zeros(32, np.int32),))
    assert "kernel.cu:4:" in str(info.value)
    assert token in str(info.value)


def test_unsupported_words_in_comments_and_strings_are_ignored():
    code = r"""
    // asm volatile and tex2D are only mentioned here
    extern "C" __global__ void k(int* y) {
      printf("no asm, no this_grid()\n");
      y[threadIdx.x] = 1;
    }"""
    y = np.zeros(2, dtype=np.int32)
    run = RawKernel(code, "k").launch((1,), (2,), (y,))
    assert run.ok and run.printf == "no asm, no this_grid()\n" * 2
    np.testing.assert_array_equal(y, [1, 1])
