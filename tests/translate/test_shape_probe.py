"""Pointer shapes measured in cuda_sim and fitted over the sizes (issue 15: "pointer shapes are
inferred by running the CUDA kernel in cuda_sim at those sizes and recording the extent each
buffer is accessed at"). Each fit is checked by evaluating it at sizes the probe never ran."""

from __future__ import annotations

import pytest

from agent.shape_probe import START_ELEMENTS, ArgProbe, extents_runner, probe_shapes
from runners.sizeexpr import evaluate


@pytest.fixture(autouse=True)
def checked(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_CHECKS", "full")  # extents are recorded in checked mode


def _launch(grid, block, smem="0"):
    def dims(sizes):
        return ([int(evaluate(g, sizes)) for g in grid], [int(evaluate(b, sizes)) for b in block],
                int(evaluate(smem, sizes)))
    return dims


ROWS = r"""
__global__ void rows(const float * x, float * dst, const int ncols, const long stride_row,
                     const float * unused) {
    const int row = blockIdx.x;
    for (int c = threadIdx.x; c < ncols; c += blockDim.x)
        dst[row * ncols + c] = 2.0f * x[row * stride_row + c];
}"""


def test_a_strided_input_and_a_dense_output_are_fitted():
    args = [ArgProbe("x", "in", "float32"), ArgProbe("dst", "out", "float32"),
            ArgProbe("ncols", "scalar", "int32", "ncols"),
            ArgProbe("stride_row", "scalar", "int64", "stride_row"),
            ArgProbe("unused", "in", "float32")]
    probe = probe_shapes(ROWS, "rows", "rows.cu", args,
                         {"nrows": 5, "ncols": 40, "stride_row": 48},
                         _launch(["nrows", "1", "1"], ["32", "1", "1"]))
    for at in ({"nrows": 3, "ncols": 7, "stride_row": 9}, {"nrows": 11, "ncols": 100,
                                                           "stride_row": 128}):
        assert evaluate(probe.shapes["x"], at) == (at["nrows"] - 1) * at["stride_row"] + \
            at["ncols"]
        assert evaluate(probe.shapes["dst"], at) == at["nrows"] * at["ncols"]
    assert "unused" in probe.unfitted and "never accessed" in probe.unfitted["unused"]


def test_each_run_has_buffers_for_its_own_sizes():
    """Runs at the given sizes, then at large ones (larger buffers), then at the given sizes
    again: that run's buffers are small again; a buffer the kernel never reaches stays small;
    a run at sizes the earlier runs bound starts with buffers large enough, in one launch."""
    args = [ArgProbe("x", "in", "float32"), ArgProbe("dst", "out", "float32"),
            ArgProbe("ncols", "scalar", "int32", "ncols"),
            ArgProbe("stride_row", "scalar", "int64", "stride_row"),
            ArgProbe("unused", "in", "float32")]
    runner = extents_runner(ROWS, "rows", "rows.cu", args,
                            _launch(["nrows", "1", "1"], ["32", "1", "1"]))
    given = {"nrows": 5, "ncols": 40, "stride_row": 48}
    assert runner.extents(given)["dst"] == 200 and runner.launches == 1
    assert runner.extents({"nrows": 40, "ncols": 3000, "stride_row": 3000})["dst"] == 120000
    assert runner.lengths["dst"] > 120000
    assert runner.lengths["unused"] == START_ELEMENTS  # each buffer sized for its own extent
    launches = runner.launches
    assert runner.extents(given)["dst"] == 200
    assert runner.lengths["dst"] == START_ELEMENTS and runner.launches == launches + 1
    assert runner.extents({"nrows": 80, "ncols": 3000, "stride_row": 3000})["dst"] == 240000
    assert runner.launches == launches + 2


CONCAT = r"""
__global__ void cat(const float * x, const float * y, float * dst, long ne00, long ne0,
                    long ne1, long ne2) {
    const long n = ne0 * ne1 * ne2;
    for (long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const long row = i / ne0, i0 = i - row * ne0;
        dst[i] = i0 < ne00 ? x[row * ne00 + i0] : y[row * (ne0 - ne00) + (i0 - ne00)];
    }
}"""


def test_a_difference_of_products_is_fitted():
    """llama.cpp's concat along dim 0: y holds (ne0 - ne00) * ne1 * ne2 elements."""
    args = [ArgProbe("x", "in", "float32"), ArgProbe("y", "in", "float32"),
            ArgProbe("dst", "out", "float32"),
            *[ArgProbe(n, "scalar", "int64", n) for n in ("ne00", "ne0", "ne1", "ne2")]]
    probe = probe_shapes(CONCAT, "cat", "cat.cu", args,
                         {"ne00": 5, "ne0": 12, "ne1": 6, "ne2": 3},
                         _launch(["ceil_div(ne0 * ne1 * ne2, 64)", "1", "1"], ["64", "1", "1"]))
    at = {"ne00": 9, "ne0": 31, "ne1": 4, "ne2": 7}
    assert evaluate(probe.shapes["y"], at) == (31 - 9) * 4 * 7
    assert evaluate(probe.shapes["x"], at) == 9 * 4 * 7


BYTES = r"""
__global__ void emb(const float * t, float * dst, const int nb1, const int dim) {
    float * row = (float *)((char *)dst + blockIdx.x * nb1);
    for (int j = threadIdx.x; j < dim; j += blockDim.x) row[j] = t[blockIdx.x] * j;
}"""


def test_a_byte_stride_gives_a_fraction_of_the_stride():
    args = [ArgProbe("t", "in", "float32"), ArgProbe("dst", "out", "float32"),
            ArgProbe("nb1", "scalar", "int32", "nb1"), ArgProbe("dim", "scalar", "int32", "dim")]
    probe = probe_shapes(BYTES, "emb", "emb.cu", args, {"n": 6, "nb1": 4 * 40, "dim": 33},
                         _launch(["n", "1", "1"], ["32", "1", "1"]))
    assert evaluate(probe.shapes["dst"], {"n": 4, "nb1": 4 * 70, "dim": 65}) == 3 * 70 + 65
    assert evaluate(probe.shapes["t"], {"n": 4, "nb1": 280, "dim": 65}) == 4


def test_a_gathered_input_takes_the_extent_its_index_values_reach():
    gather = r"""
__global__ void gather(const float * src, const int * idx, float * dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[idx[i] * idx[i] * 7];
}"""
    args = [ArgProbe("src", "in", "float32"), ArgProbe("idx", "in", "int32"),
            ArgProbe("dst", "out", "float32"), ArgProbe("n", "scalar", "int32", "n")]
    probe = probe_shapes(gather, "gather", "g.cu", args, {"n": 100},
                         _launch(["ceil_div(n, 32)", "1", "1"], ["32", "1", "1"]))
    assert probe.shapes["dst"] == "n" and probe.shapes["idx"] == "n"
    # indices 0..3 (as cases draw them): src's extent 64 moves with no size
    assert probe.shapes["src"] == "64"


PLANES = r"""
__global__ void planes(const float * x, float * dst, const long ne0, const long s1,
                       const long s2) {
    const long i1 = blockIdx.x, i2 = blockIdx.y;
    for (long c = threadIdx.x; c < ne0; c += blockDim.x)
        dst[(i2 * gridDim.x + i1) * ne0 + c] = x[i1 * s1 + i2 * s2 + c];
}"""


def test_a_stride_times_a_count_of_one_is_fitted():
    """llama.cpp's ``i3 * s03`` with ``ne03 == 1``: doubling s2 alone moves nothing, so the
    probe finds it where the count has moved too."""
    args = [ArgProbe("x", "in", "float32"), ArgProbe("dst", "out", "float32"),
            *[ArgProbe(n, "scalar", "int64", n) for n in ("ne0", "s1", "s2")]]
    probe = probe_shapes(PLANES, "planes", "planes.cu", args,
                         {"ne0": 20, "ne1": 3, "ne2": 1, "s1": 24, "s2": 80},
                         _launch(["ne1", "ne2", "1"], ["32", "1", "1"]))
    at = {"ne0": 7, "ne1": 5, "ne2": 4, "s1": 9, "s2": 50}
    assert evaluate(probe.shapes["x"], at) == 4 * 9 + 3 * 50 + 7
    assert evaluate(probe.shapes["dst"], at) == 7 * 5 * 4
