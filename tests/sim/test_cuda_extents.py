"""cuda_sim access extents: in checked mode a launch records, per buffer, the elements [lo, hi)
any thread read and wrote (kport fits shape expressions from them), exact for in-bounds
accesses, with out-of-bounds ones included; fast mode records none."""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel


@pytest.fixture(autouse=True)
def checked(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_CHECKS", "full")
    monkeypatch.setenv("KPORT_SIM_THREADS", "4")  # groups run on several OS threads at once


def _f32(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


AFFINE = r"""
extern "C" __global__ void affine(const float* x, float* y, const float* unused, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i + 3] = x[2 * i + 1];
}
"""


@pytest.mark.parametrize("n", [5, 100])
def test_affine_read_and_write_extents_are_exact(n):
    x, y = _f32(2 * n + 40), np.zeros(n + 40, np.float32)
    run = RawKernel(AFFINE, "affine").launch(((n + 31) // 32,), (32,),
                                             (x, y, _f32(8), np.int32(n)))
    assert run.ok, run.findings
    assert run.extents == {"x": {"read": (1, 2 * n), "write": None},
                           "y": {"read": None, "write": (3, n + 3)},
                           "unused": {"read": None, "write": None}}
    np.testing.assert_array_equal(y[3:n + 3], x[1:2 * n:2])


def test_strided_row_reads_span_to_the_last_rows_end():
    code = r"""
    extern "C" __global__ void row_sums(const float* a, float* out, int rows, int cols, int ld) {
      int r = blockIdx.x * blockDim.x + threadIdx.x;
      if (r >= rows) return;
      float s = 0.f;
      for (int c = 0; c < cols; c++) s += a[r * ld + c];
      out[r] = s;
    }"""
    rows, cols, ld = 7, 5, 12
    a, out = _f32(rows * ld + 30), np.zeros(rows + 9, np.float32)
    run = RawKernel(code, "row_sums").launch((2,), (4,), (a, out, np.int32(rows),
                                                          np.int32(cols), np.int32(ld)))
    assert run.ok, run.findings
    assert run.extents["a"] == {"read": (0, (rows - 1) * ld + cols), "write": None}
    assert run.extents["out"] == {"read": None, "write": (0, rows)}


def test_many_concurrent_groups_give_exact_extents():
    # Reversed: the lowest element is written by the last group, the highest by the first.
    code = r"""
    extern "C" __global__ void reverse(const int* x, int* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[n + 6 - i] = x[i + 2];
    }"""
    n = 64 * 97 + 13
    x, y = np.arange(n + 50, dtype=np.int32), np.zeros(n + 50, np.int32)
    run = RawKernel(code, "reverse").launch(((n + 63) // 64,), (64,), (x, y, np.int32(n)))
    assert run.ok, run.findings
    assert run.extents == {"x": {"read": (2, n + 2), "write": None},
                           "y": {"read": None, "write": (7, n + 7)}}


def test_wide_and_narrow_accesses_round_to_whole_elements():
    code = r"""
    extern "C" __global__ void widths(const float* v, const float* b, float* out) {
      int i = threadIdx.x;
      float4 q = reinterpret_cast<const float4*>(v)[i];
      out[i] = q.x + q.w + ((const unsigned char*)b)[5];
    }"""
    run = RawKernel(code, "widths").launch((1,), (3,), (_f32(20), _f32(4), np.zeros(3, np.float32)))
    assert run.ok, run.findings
    assert run.extents["v"]["read"] == (0, 12)  # three float4 loads
    assert run.extents["b"]["read"] == (1, 2)  # byte 5 lies in element 1


def test_atomic_updates_count_as_writes():
    code = r"""
    extern "C" __global__ void count(const int* x, int* hist) {
      atomicAdd(&hist[x[threadIdx.x]], 1);
    }"""
    x = np.array([4, 2, 4, 3], np.int32)
    run = RawKernel(code, "count").launch((1,), (4,), (x, np.zeros(8, np.int32)))
    assert run.ok, run.findings
    assert run.extents["hist"]["write"] == (2, 5)


def test_out_of_bounds_accesses_widen_the_extent_and_are_still_reported():
    code = r"""
    extern "C" __global__ void shifted(const float* x, float* y, int n) {
      int i = threadIdx.x;
      if (i < n) y[i] = x[i - 1] + x[i + 1];
    }"""
    n = 8
    run = RawKernel(code, "shifted").launch((1,), (n,), (_f32(n), np.zeros(n, np.float32),
                                                          np.int32(n)))
    assert [f.kind for f in run.findings] == ["out_of_bounds"] * len(run.findings)
    assert run.findings
    assert run.extents["x"]["read"] == (-1, n + 1)
    assert run.extents["y"]["write"] == (0, n)


def test_fast_mode_records_no_extents(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_CHECKS", "fast")
    x, y = _f32(50), np.zeros(20, np.float32)
    run = RawKernel(AFFINE, "affine").launch((1,), (8,), (x, y, _f32(8), np.int32(8)))
    assert run.ok, run.findings
    assert run.extents == {}
