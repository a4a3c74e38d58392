"""cuda_sim reads a source as nvcc does (issue 15): local headers with a comment after the
include, constructs it cannot model refused only where the compiler reads them (not in an `#if`
branch for another platform) and named at their own file and line."""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel
from runners.srcrewrite import SourceError

KERNEL = r"""
#include "helpers.cuh"  // twice(), and HIP's inline asm beside it
extern "C" __global__ void run(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = twice(y[i]);
}
"""
HELPERS = r"""#pragma once
static __device__ float twice(float v) {
#if defined(__HIP_PLATFORM_AMD__)
    asm volatile("v_add_f32 %0, %1, %1" : "=v"(v) : "v"(v));
    return v;
#else
    return v + v;
#endif
}
"""


def _launch(tmp_path, helpers: str):
    (tmp_path / "helpers.cuh").write_text(helpers)
    y = np.arange(8, dtype=np.float32)
    run = RawKernel(KERNEL, "run", options=(f"-I{tmp_path}",), filename="k.cu").launch(
        (1,), (8,), [y, np.int32(8)])
    return run, y


def test_asm_in_a_branch_the_compiler_skips_is_not_refused(tmp_path):
    run, y = _launch(tmp_path, HELPERS)
    assert run.ok, run.diagnostics
    assert y.tolist() == [2.0 * i for i in range(8)]


def test_asm_in_a_branch_the_compiler_reads_fails_at_its_own_line(tmp_path):
    run, _ = _launch(tmp_path, HELPERS.replace("defined(__HIP_PLATFORM_AMD__)",
                                               "!defined(__HIP_PLATFORM_AMD__)"))
    assert not run.compiled
    found = [d for d in run.diagnostics if "inline PTX assembly" in d.message]
    assert [(d.file, d.line) for d in found] == [("helpers.cuh", 4)], run.diagnostics


def test_asm_outside_any_branch_is_refused_at_once_in_its_own_file(tmp_path):
    helpers = HELPERS.replace("#if defined(__HIP_PLATFORM_AMD__)\n", "").replace(
        "#else\n    return v + v;\n#endif\n", "")
    with pytest.raises(SourceError, match=r"^helpers\.cuh:3: inline PTX assembly"):
        _launch(tmp_path, helpers)


def test_a_header_included_only_for_another_platform_is_not_refused(tmp_path):
    """llama.cpp's common.cuh includes vendors/hip.h (CUDA calls HIP lacks, inline asm) only
    under `#if defined(GGML_USE_HIP)`: what that header holds waits on the include's group."""
    (tmp_path / "hip.h").write_text('#pragma once\nstatic __device__ int lane() {\n'
                                    '    int l; asm("v_mbcnt %0" : "=v"(l)); return l;\n}\n')
    guarded = HELPERS.replace("#pragma once\n", '#pragma once\n#if defined(__HIP_PLATFORM_AMD__)'
                              '\n#include "hip.h"\n#endif\n')
    run, y = _launch(tmp_path, guarded)
    assert run.ok, run.diagnostics
    assert y.tolist() == [2.0 * i for i in range(8)]
    run, _ = _launch(tmp_path, guarded.replace("#if defined(__HIP_PLATFORM_AMD__)", "#if 1", 1))
    found = [d for d in run.diagnostics if "inline PTX assembly" in d.message]
    assert not run.compiled and [(d.file, d.line) for d in found] == [("hip.h", 3)]


def test_a_pragma_once_header_first_included_in_a_skipped_branch_is_read_where_it_counts(
        tmp_path):
    """vLLM's amd/quant_utils.cuh includes dtype_fp8.cuh under `#ifdef USE_ROCM` before the
    nvidia branch does: the header must come in where the compiler reads it, once."""
    (tmp_path / "amd").mkdir()
    (tmp_path / "dtype.cuh").write_text("#pragma once\nenum class Kind { kAuto = 0, kE4M3 = 1 };\n")
    (tmp_path / "amd" / "quant.cuh").write_text('#pragma once\n#include "../dtype.cuh"\n')
    code = ('#ifdef USE_ROCM\n#include "amd/quant.cuh"\n#endif\n#include "dtype.cuh"\n'
            '#include "dtype.cuh"\n'
            'extern "C" __global__ void k(int* y) { y[threadIdx.x] = (int)Kind::kE4M3 + 1; }\n')
    y = np.zeros(4, np.int32)
    run = RawKernel(code, "k", options=(f"-I{tmp_path}",), filename="k.cu").launch((1,), (4,),
                                                                                  [y])
    assert run.ok, run.diagnostics
    assert y.tolist() == [2, 2, 2, 2]
