"""cuda_sim gives device code the host-library names nvcc lets real kernels use in constant
expressions: std::initializer_list and std::min/std::max (causal-conv1d's traits size shared
memory with `std::max({sizeof(A), sizeof(B)})`)."""

import numpy as np

from runners.cuda_sim import RawKernel

SRC = r"""
constexpr size_t custom_max(std::initializer_list<size_t> ilist) { return std::max(ilist); }
template <typename T> constexpr T constexpr_min(T a, T b) { return std::min(a, b); }
struct Traits { static constexpr int kSmem = custom_max({sizeof(float4), 4, sizeof(double)}); };
__global__ void k(float* out) {
  out[threadIdx.x] = Traits::kSmem + constexpr_min(2, 7) + std::max(1.5f, -2.0f);
}
"""


def test_initializer_list_and_min_max_in_device_constant_expressions():
    out = np.zeros(4, np.float32)
    run = RawKernel(SRC, "k").launch((1, 1, 1), (4, 1, 1), (out,))
    assert run.ok, run.diagnostics
    np.testing.assert_array_equal(out, 16 + 2 + 1.5)
