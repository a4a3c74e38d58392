"""wmma in Metal (agent/translate/wmma.py, kb/rules/metal/kport_wmma.metal): a kernel's
nvcuda::wmma fragments are mapped onto kport's MSL library of 8x8 simdgroup_matrix tiles, and
the port run in metal_sim gives what the CUDA kernel gives in cuda_sim within half tolerances
(both accumulate in float, in different orders). Direct access to a fragment's elements stays a
counted TODO: no element layout carries across."""

import textwrap

import numpy as np
import pytest

from agent.translate import translate_kernel
from agent.translate.wmma import library
from tests.translate.test_translate import run_both

HEAD = "#include <mma.h>\nusing namespace nvcuda;\n"


def _halves(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float16)


def _check(src, kernel, inputs, outs, grid, block, tol=2e-3):
    tr, want, got = run_both(textwrap.dedent(src), kernel, inputs, outs, grid, block)
    assert not tr.todos, tr.todos
    assert "namespace kport_wmma" in tr.header
    for name, value in want.items():
        np.testing.assert_allclose(got[name].astype(np.float64), value.astype(np.float64),
                                   rtol=tol, atol=tol, err_msg=name)
    return tr


# Warp w of the block multiplies tile w of x (row_major) by tile w+1 (col_major: its transpose)
# plus a staged accumulator, stores row-major, then column-major through shared memory.
LAYOUTS = HEAD + """
__global__ void k(const half* x, const float* c0, float* y, float* z) {
  __shared__ __align__(32) float stage[2][256];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = lane; i < 256; i += 32) stage[w][i] = c0[i];
  __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(c, &stage[w][0], 16, wmma::mem_col_major);
  wmma::load_matrix_sync(a, x + 256 * w, 16);
  wmma::load_matrix_sync(b, x + 256 * (w + 1), 16);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(y + 256 * w, c, 16, wmma::mem_row_major);
  wmma::store_matrix_sync(&stage[w][0], c, 16, wmma::mem_col_major);
  __syncwarp();
  for (int i = lane; i < 256; i += 32) z[256 * w + i] = stage[w][i];
}
"""


def test_row_and_col_major_loads_and_stores_from_device_and_threadgroup_memory():
    c0 = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    tr = _check(LAYOUTS, "k", {"x": _halves(768), "c0": c0},
                {"y": np.zeros(512, np.float32), "z": np.zeros(512, np.float32)}, ["1"], [64])
    assert tr.mapped["wmma::mma_sync"] == 1 and tr.mapped["wmma::col_major"] == 1
    assert {"tensor.wmma_mma", "tensor.load_col_major"} <= set(tr.rules_used)
    assert "kport_wmma::load_matrix_sync(b, x + 256 * (w + 1), 16)" in tr.body
    assert "threadgroup __attribute__((aligned(32))) float stage[2][256];" in tr.body


def test_the_result_matches_numpy_not_just_the_other_simulator():
    x = _halves(768, 2)
    c0 = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    _, _, got = run_both(textwrap.dedent(LAYOUTS), "k", {"x": x, "c0": c0},
                         {"y": np.zeros(512, np.float32), "z": np.zeros(512, np.float32)},
                         ["1"], [64])
    t = [x[256 * i:256 * (i + 1)].astype(np.float64).reshape(16, 16) for i in range(3)]
    c = c0.astype(np.float64).reshape(16, 16).T  # loaded mem_col_major
    for w in range(2):
        want = t[w] @ t[w + 1].T + c
        np.testing.assert_allclose(got["y"][256 * w:256 * (w + 1)].reshape(16, 16), want,
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got["z"][256 * w:256 * (w + 1)].reshape(16, 16), want.T,
                                   rtol=1e-4, atol=1e-4)


# Fully qualified spelling (no using-directive), a half accumulator, a K loop over 2 steps and
# fragments in a helper function.
HALF_ACC = """
#include <mma.h>
__device__ void step(nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, half>& c,
                     const half* a_ptr, const half* b_ptr, int lda, int ldb) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> a;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::row_major> b;
  nvcuda::wmma::load_matrix_sync(a, a_ptr, lda);
  nvcuda::wmma::load_matrix_sync(b, b_ptr, ldb);
  nvcuda::wmma::mma_sync(c, a, b, c);
}
__global__ void k(const half* a, const half* b, half* y) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, half> c;
  nvcuda::wmma::fill_fragment(c, __float2half(0.5f));
  for (int k0 = 0; k0 < 32; k0 += 16) step(c, a + k0, b + 16 * k0, 32, 16);
  nvcuda::wmma::store_matrix_sync(y, c, 16, nvcuda::wmma::mem_row_major);
}
"""


def test_qualified_names_a_half_accumulator_and_a_helper_function():
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, 16 * 32).astype(np.float16)
    b = rng.uniform(-1, 1, 32 * 16).astype(np.float16)
    tr = _check(HALF_ACC, "k", {"a": a, "b": b}, {"y": np.zeros(256, np.float16)}, ["1"], [32],
                tol=2e-2)
    ported = tr.header.replace(library(), "") + tr.body
    assert "nvcuda" not in ported and "kport_wmma::kport_wmma" not in ported
    assert "kport_wmma::fragment<kport_wmma::accumulator, 16, 16, 16, half>& c" in ported


def test_a_kernel_without_wmma_carries_no_library():
    tr = translate_kernel("__global__ void k(const float* x, float* y) { y[0] = x[0]; }", "k")
    assert "kport_wmma" not in tr.header


ELEMENTS = HEAD + """
__global__ void k(const half* x, float* y) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::fill_fragment(c, 0.0f);
  wmma::load_matrix_sync(a, x, 16);
  wmma::load_matrix_sync(b, x, 16);
  wmma::mma_sync(c, a, b, c);
  for (int t = 0; t < c.num_elements; t++) c.x[t] = fmaxf(c.x[t], 0.0f);
  wmma::store_matrix_sync(y, c, 16, wmma::mem_row_major);
}
"""


def test_fragment_elements_are_counted_todos_and_the_port_does_not_compile():
    import mlx.core as mx

    from runners.metal_sim import metal_kernel

    tr = translate_kernel(ELEMENTS, "k", grid=["1"], block=[32])
    todos = [(t.rule, t.construct, t.line) for t in tr.todos]
    assert todos == [("tensor.thread_elements", "wmma fragment element c.num_elements", 12),
                     ("tensor.thread_elements", "wmma fragment element c.x", 12),
                     ("tensor.thread_elements", "wmma fragment element c.x", 12)]
    assert tr.unmapped["wmma fragment element c.x"] == 2
    assert tr.body.count("KPORT-TODO(tensor.thread_elements)") == 3
    run = metal_kernel("t", tr.inputs, tr.outputs, tr.body, tr.header).launch(
        inputs=[mx.array(_halves(256))], output_shapes=[(256,)], output_dtypes=[mx.float32],
        grid=(32, 1, 1), threadgroup=(32, 1, 1))
    assert not run.compiled


def test_a_wmma_member_the_library_lacks_stays_a_todo_naming_it():
    src = HEAD + """
    __global__ void k(const float* x, float* y) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
      y[0] = x[0];
    }"""
    tr = translate_kernel(textwrap.dedent(src), "k")
    assert [(t.rule, t.construct) for t in tr.todos][0] == ("tensor.wmma_mma", "wmma::precision")
    assert "KPORT-TODO(tensor.wmma_mma): kport's Metal wmma has no wmma::precision" in tr.body


@pytest.mark.parametrize("m, n", [(32, 8), (8, 32)])
def test_the_32x8_and_8x32_shapes_in_metal_sim(m, n):
    """cuda_sim models m16n16k16 only: these shapes are checked against numpy."""
    import mlx.core as mx

    from runners.metal_sim import metal_kernel

    body = f"""
    kport_wmma::fragment<kport_wmma::matrix_a, {m}, {n}, 16, half, kport_wmma::row_major> a;
    kport_wmma::fragment<kport_wmma::matrix_b, {m}, {n}, 16, half, kport_wmma::col_major> b;
    kport_wmma::fragment<kport_wmma::accumulator, {m}, {n}, 16, float> c;
    kport_wmma::fill_fragment(c, 1.0f);
    kport_wmma::load_matrix_sync(a, a_in, 16);
    kport_wmma::load_matrix_sync(b, b_in, 16);
    kport_wmma::mma_sync(c, a, b, c);
    kport_wmma::store_matrix_sync(y, c, {n}, kport_wmma::mem_row_major);"""
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(k * 16).astype(np.float16) for k in (m, n))
    k = metal_kernel("t", ["a_in", "b_in"], ["y"], textwrap.dedent(body), library())
    (y,) = k(inputs=[mx.array(a), mx.array(b)], output_shapes=[(m * n,)],
             output_dtypes=[mx.float32], grid=(32, 1, 1), threadgroup=(32, 1, 1))
    want = a.astype(np.float64).reshape(m, 16) @ b.astype(np.float64).reshape(n, 16).T + 1.0
    np.testing.assert_allclose(np.array(y).reshape(m, n), want, rtol=1e-4, atol=1e-4)


def test_cuda_sims_wmma_gemm_ports_with_a_2d_block_and_per_warp_staging():
    """tests/sim/test_cuda_wmma.py's GEMM (checked there against numpy): warps along
    threadIdx.y, `__shared__ __align__(32) half As[2][256], Bs[2][256]`, an accumulator loaded
    column-major from device memory, a K loop."""
    from tests.sim.test_cuda_wmma import GEMM_CODE

    rng = np.random.default_rng(6)
    n = 32
    inputs = {"A": rng.standard_normal(n * n).astype(np.float16),
              "Bt": rng.standard_normal(n * n).astype(np.float16),
              "C": rng.standard_normal(n * n).astype(np.float32),
              "M": np.int32(n), "N": np.int32(n), "K": np.int32(n)}
    tr = _check(GEMM_CODE, "wmma_gemm", inputs, {"D": np.zeros(n * n, np.float32)}, ["1", "2"],
                [32, 2])
    assert tr.mapped["__align__"] == 1 and tr.roles["D"] == "out"
