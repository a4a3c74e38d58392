"""cuda_sim launch semantics: built-in index variables, qualifiers, templates, local includes.

Every expected value is computed here with numpy from the launch shape and the inputs.
"""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel, RawModule

INDEX_CODE = r"""
extern "C" __global__ void where(int* out) {
  int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  int* o = out + 13 * (bid * blockDim.x * blockDim.y * blockDim.z + tid);
  o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
  o[3] = blockIdx.x;  o[4] = blockIdx.y;  o[5] = blockIdx.z;
  o[6] = blockDim.x;  o[7] = blockDim.y;  o[8] = blockDim.z;
  o[9] = gridDim.x;   o[10] = gridDim.y;  o[11] = gridDim.z;
  o[12] = warpSize;
}
"""


def _expected_positions(grid: tuple, block: tuple) -> np.ndarray:
    """Rows of (threadIdx, blockIdx, blockDim, gridDim, 32) in the kernel's output order."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    rows = []
    for bz in range(g[2]):
        for by in range(g[1]):
            for bx in range(g[0]):
                for tz in range(b[2]):
                    for ty in range(b[1]):
                        for tx in range(b[0]):
                            rows.append((tx, ty, tz, bx, by, bz, *b, *g, 32))
    return np.array(rows, dtype=np.int32)


@pytest.mark.parametrize("grid, block", [
    ((3,), (40,)),  # 1-D, a partial second warp
    ((2, 3), (8, 4)),
    ((2, 2, 2), (4, 3, 2)),
    (5, 7),  # plain integers, as CuPy accepts
])
def test_builtin_index_variables(grid, block):
    expected = _expected_positions(grid if isinstance(grid, tuple) else (grid,),
                                   block if isinstance(block, tuple) else (block,))
    out = np.full(expected.size, -1, dtype=np.int32)
    RawKernel(INDEX_CODE, "where")(grid, block, (out,))
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


def test_grid_stride_loop_covers_every_element_once():
    code = r"""
    extern "C" __global__ void count(int* hits, int n) {
      for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        hits[i] += i % 7;
    }"""
    n = 1000
    hits = np.ones(n, dtype=np.int32)
    RawKernel(code, "count")((3,), (64,), (hits, np.int32(n)))
    np.testing.assert_array_equal(hits, 1 + np.arange(n) % 7)


QUALIFIERS_CODE = r"""
__constant__ float kCoeffs[3] = {0.5f, -2.0f, 4.0f};

__device__ __forceinline__ float square(float v) { return v * v; }
__host__ __device__ inline int twice(int v) { return 2 * v; }
__device__ __noinline__ float poly(float v) {
  return kCoeffs[0] + kCoeffs[1] * v + kCoeffs[2] * square(v);
}

extern "C" __global__ void __launch_bounds__(128, 2)
apply(const float* __restrict__ x, float* __restrict__ y, int* __restrict__ z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = poly(x[i]);
    z[i] = twice(i);
  }
}
"""


def test_function_qualifiers_constant_memory_and_restrict():
    n = 300
    # Multiples of 1/16: every product and sum is exact in float32, fused or not.
    x = ((np.arange(n) - 150) / 16).astype(np.float32)
    y = np.zeros(n, dtype=np.float32)
    z = np.zeros(n, dtype=np.int32)
    RawKernel(QUALIFIERS_CODE, "apply")((3,), (128,), (x, y, z, np.int32(n)))
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(y, 0.5 - 2.0 * x64 + 4.0 * x64 * x64)
    np.testing.assert_array_equal(z, 2 * np.arange(n))


TEMPLATE_CODE = r"""
template <typename T, int SCALE>
__global__ void axpy(const T* x, T* y, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] * T(SCALE) + y[i];
}
"""


@pytest.mark.parametrize("expr, dtype, scale", [
    ("axpy<float, 2>", np.float32, 2),
    ("axpy<double, 3>", np.float64, 3),
    ("axpy<int, -1>", np.int32, -1),
])
def test_template_kernels_by_name_expression(expr, dtype, scale):
    exprs = ["axpy<float, 2>", "axpy<double, 3>", "axpy<int, -1>"]
    kernel = RawModule(code=TEMPLATE_CODE, name_expressions=exprs).get_function(expr)
    n = 100
    x = np.arange(n).astype(dtype)
    y = (np.arange(n) % 5).astype(dtype)
    expected = dtype(3) * x * dtype(scale) + y
    kernel((1,), (128,), (x, y, dtype(3), np.int32(n)))
    np.testing.assert_array_equal(y, expected)


def test_module_with_several_extern_c_kernels():
    code = r"""
    extern "C" {
    __global__ void add_one(int* v) { v[threadIdx.x] += 1; }
    __global__ void negate(int* v) { v[threadIdx.x] = -v[threadIdx.x]; }
    }"""
    module = RawModule(code=code)
    v = np.arange(32, dtype=np.int32)
    module.get_function("add_one")((1,), (32,), (v,))
    module.get_function("negate")((1,), (32,), (v,))
    np.testing.assert_array_equal(v, -(np.arange(32) + 1))


def test_name_expression_must_be_declared():
    module = RawModule(code=TEMPLATE_CODE, name_expressions=["axpy<float, 2>"])
    with pytest.raises(ValueError, match="name_expressions"):
        module.get_function("axpy<float, 5>")


HELPERS_CUH = """#pragma once
#define KP_TEST_OFFSET 100
__device__ inline int shifted(int v) { return v * v + KP_TEST_OFFSET; }
"""


def test_include_resolved_through_I_option(tmp_path):
    (tmp_path / "helpers.cuh").write_text(HELPERS_CUH)
    code = r"""#include "helpers.cuh"
    extern "C" __global__ void use(int* v) {
      int i = threadIdx.x;
      v[i] = shifted(i) - KP_TEST_OFFSET / 2;
    }"""
    v = np.zeros(64, dtype=np.int32)
    RawKernel(code, "use", options=(f"-I{tmp_path}",))((1,), (64,), (v,))
    i = np.arange(64)
    np.testing.assert_array_equal(v, i * i + 100 - 50)


def test_nested_include_and_template_from_header(tmp_path):
    (tmp_path / "inner.cuh").write_text("template <int K> __device__ int times(int v) "
                                        "{ return K * v; }\n")
    (tmp_path / "outer.cuh").write_text('#pragma once\n#include "inner.cuh"\n')
    code = r"""#include "outer.cuh"
    template <int K> __global__ void scale(int* v) { v[threadIdx.x] = times<K>(v[threadIdx.x]); }
    """
    module = RawModule(code=code, options=(f"-I{tmp_path}",), name_expressions=["scale<7>"])
    v = np.arange(16, dtype=np.int32)
    module.get_function("scale<7>")((1,), (16,), (v,))
    np.testing.assert_array_equal(v, 7 * np.arange(16))


@pytest.mark.parametrize("options", [("-I{d}",), ("-I", "{d}"), ("--include-path={d}",),
                                     ("--include-path", "{d}")])
def test_include_path_option_spellings(tmp_path, options):
    from runners.cuda_sim import include_dirs

    opts = tuple(o.format(d=tmp_path) for o in options)
    assert include_dirs(opts) == [str(tmp_path)]
