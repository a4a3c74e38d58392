"""Standalone .metal files with explicit [[buffer(i)]] bindings run in metal_sim too."""

import numpy as np
import pytest

from runners.metal_sim import MetalLibrary
from runners.srcrewrite import SourceError

SOURCE = r"""#include <metal_stdlib>
using namespace metal;

struct Params { uint n; float scale; };

kernel void scale_add(device const float* x [[buffer(0)]],
                      device float* y [[buffer(1)]],
                      constant Params& p [[buffer(2)]],
                      uint gid [[thread_position_in_grid]]) {
  if (gid < p.n) y[gid] = x[gid] * p.scale + y[gid];
}

template <typename T>
kernel void block_sum(device const T* x [[buffer(0)]], device T* out [[buffer(1)]],
                      threadgroup T* scratch [[threadgroup(0)]],
                      ushort tid [[thread_position_in_threadgroup]],
                      uint2 tg [[threadgroup_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]]) {
  T v = simd_sum(x[tg.x * 64 + tid]);
  if (lane == 0) scratch[tid / 32] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0) out[tg.x] = scratch[0] + scratch[1];
}
template [[host_name("block_sum_float")]] [[kernel]] decltype(block_sum<float>) block_sum<float>;
template [[host_name("block_sum_int")]] [[kernel]] decltype(block_sum<int>) block_sum<int>;
"""


def test_struct_constant_parameter_and_non_uniform_grid():
    lib = MetalLibrary(SOURCE)
    x = np.arange(100, dtype=np.float32)
    y = np.ones(100, np.float32)
    params = np.array([(90, 2.0)], dtype=[("n", np.uint32), ("scale", np.float32)])
    run = lib.function("scale_add").launch({0: x, 1: y, 2: params}, grid=(100, 1, 1),
                                           threadgroup=(32, 1, 1))
    assert run.ok, run.findings or run.diagnostics
    np.testing.assert_array_equal(y[:90], x[:90] * 2 + 1)
    np.testing.assert_array_equal(y[90:], 1)
    np.testing.assert_array_equal(x, np.arange(100))  # const buffers are not written back


@pytest.mark.parametrize("host, dtype", [("block_sum_float", np.float32),
                                         ("block_sum_int", np.int32)])
def test_template_kernels_by_host_name_with_threadgroup_memory(host, dtype):
    x = np.arange(256).astype(dtype)
    out = np.zeros(4, dtype)
    run = MetalLibrary(SOURCE).function(host).launch(
        {0: x, 1: out}, threadgroups=(4, 1, 1), threadgroup=(64, 1, 1), threadgroup_memory=8)
    assert run.ok, run.findings or run.diagnostics
    np.testing.assert_array_equal(out, x.reshape(4, 64).sum(axis=1))


def test_missing_buffer_and_unknown_kernel_are_clear_errors():
    lib = MetalLibrary(SOURCE)
    with pytest.raises(ValueError, match=r"needs buffer\(1\) for `y`"):
        lib.function("scale_add").launch({0: np.zeros(4, np.float32)}, grid=(4, 1, 1))
    with pytest.raises(SourceError, match="no `kernel void nope"):
        lib.function("nope")


def test_out_of_bounds_in_a_metal_file_names_file_and_line():
    src = SOURCE.replace("if (gid < p.n) y[gid]", "y[gid + 1]")
    y = np.zeros(8, np.float32)
    params = np.array([(8, 1.0)], dtype=[("n", np.uint32), ("scale", np.float32)])
    run = MetalLibrary(src, filename="mine.metal").function("scale_add").launch(
        {0: np.zeros(8, np.float32), 1: y, 2: params}, grid=(8, 1, 1), threadgroup=(8, 1, 1))
    oob = [f for f in run.findings if f.kind == "out_of_bounds"]
    assert oob and (oob[0].file, oob[0].line) == ("mine.metal", 10)
    assert "buffer 'y' at element 8" in oob[0].message
