"""The translator writes the address space of every pointer it emits (issue 14): byte-offset
casts keep `device`, pointers derived from an input take its space (`auto`: MLX passes an input
of fewer than 8 elements as `constant`), vector views of inputs read through kport_vload,
helper references are `thread`, and a pointer it cannot trace is a counted KPORT-TODO. Each
translation runs in metal_sim against cuda_sim, at sizes where the input is `constant` too."""

import numpy as np
import pytest

from agent.translate import translate_kernel

from .test_translate import run_both

BYTE_OFFSETS = """
__global__ void rows(const float* __restrict__ src, float* __restrict__ dst, int nb1, int n) {
    const float* x = (const float*) ((const char*) src + blockIdx.x * nb1);
    float* y = (float*) ((char*) dst + blockIdx.x * nb1);
    if (threadIdx.x < n) y[threadIdx.x] = 2.0f * x[threadIdx.x];
}"""

VECTOR_VIEW = """
__device__ void twice(float& v) { v *= 2.0f; }
__global__ void scale4(const float* __restrict__ x, float* __restrict__ y, int n) {
    const float* row = x + 4 * blockIdx.x * blockDim.x;
    const float4* x4 = reinterpret_cast<const float4*>(row);
    int i = threadIdx.x;
    if (4 * (blockIdx.x * blockDim.x + i) + 3 < n) {
        float4 v = x4[i];
        twice(v.x); twice(v.y); twice(v.z); twice(v.w);
        reinterpret_cast<float4*>(y)[blockIdx.x * blockDim.x + i] = v;
    }
}"""


def test_byte_offset_casts_keep_the_device_space():
    tr = translate_kernel(BYTE_OFFSETS, "rows", grid=[2], block=[8])
    assert "(const device float*) ((const device char*) src" in tr.body.replace(" *", "*")
    assert "(device float*) ((device char*) dst" in tr.body.replace(" *", "*")
    src = np.arange(16, dtype=np.float32)
    _, want, got = run_both(BYTE_OFFSETS, "rows", {"src": src, "nb1": np.int32(32),
                                                   "n": np.int32(8)},
                            {"dst": np.zeros(16, np.float32)}, [2], [8])
    np.testing.assert_array_equal(got["dst"], want["dst"])


@pytest.mark.parametrize("n", [4, 64])  # 4 elements: MLX passes x as `const constant float*`
def test_vector_views_of_inputs_work_in_either_space(n):
    tr = translate_kernel(VECTOR_VIEW, "scale4", grid=[1], block=[n // 4])
    assert "auto row = x + " in tr.body and "kport_vload<float4, 4>(row, i)" in tr.body
    assert "void twice(thread float& v)" in tr.header
    x = np.arange(n, dtype=np.float32) + 1
    _, want, got = run_both(VECTOR_VIEW, "scale4", {"x": x, "n": np.int32(n)},
                            {"y": np.zeros(n, np.float32)}, [1], [n // 4])
    np.testing.assert_array_equal(got["y"], want["y"])


def test_a_pointer_it_cannot_trace_is_a_counted_todo():
    src = """__global__ void k(float* y, int n) {
    float buf[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    float* p = nullptr;  // (`float* p = buf + k` is traced: thread, thread_casts.py)
    p = buf + (n & 3);
    y[threadIdx.x] = *p;
}"""
    tr = translate_kernel(src, "k", grid=[1], block=[1])
    assert "KPORT-TODO(memory.pointer_params_address_space)" in tr.body
    assert tr.unmapped["pointer address space"] == 1 and tr.coverage < 1
