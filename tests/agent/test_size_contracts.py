"""Sizes that keep the host's contracts (issue 15): relations among the given sizes are kept in
every size set kport makes (the shape probe's runs, the guessed case's second size set, the
judge's held-out draws through check.constraints), and integer inputs read as CSR offsets are
filled with valid offsets. Every expected value here is worked out from the kernel's code."""

from __future__ import annotations

import numpy as np

from agent.kernel_reads import read_kernel
from agent.shape_probe import ArgProbe, probe_shapes
from agent.size_relations import find_relations
from corpus.check import csr_offsets
from runners.sizeexpr import evaluate

# extents are recorded in checked mode (the fixture); launches as the shape probe's tests read
from tests.translate.test_shape_probe import _launch, checked  # noqa: E402, F401


def test_a_size_equal_to_a_product_of_others_moves_with_them():
    rel = find_relations({"num_groups": 8, "group_size": 300, "ne_elements": 2400})
    assert [r.text() for r in rel.relations] == ["ne_elements == num_groups * group_size"]
    assert rel.free() == ["num_groups", "group_size"]
    moved = rel.keep({"num_groups": 16, "group_size": 300, "ne_elements": 2400})
    assert moved == {"num_groups": 16, "group_size": 300, "ne_elements": 4800}


def test_a_quotient_the_code_states_keeps_multiples_and_a_template_head_size():
    """llama.cpp's wkv: the launch's block is C / H (== the template's 64), the kernel
    computes T / B; B == H == 2 is no relation (an equality is too often a coincidence)."""
    rel = find_relations({"B": 2, "T": 8, "C": 128, "H": 2}, {("C", "H"), ("T", "B")}, {64})
    stated = [r.text() for r in rel.stated().relations]
    assert sorted(stated) == ["C == 64 * H", "T % B == 0"]
    assert rel.free() == ["B", "T", "H"]
    kept = rel.keep({"B": 3, "T": 8, "C": 128, "H": 5})
    assert kept["C"] == 320 and kept["T"] % 3 == 0 and kept["T"] >= 8
    # a fit over the free sizes reads back in the sizes the kernel takes
    assert rel.rewrite([(64, ("T", "H")), (4096, ("B", "H"))]) == [(1, ("T", "C")),
                                                                 (64, ("B", "C"))]


GROUPS = r"""
__global__ void groups(const float * x, float * dst, const int group_size, const int ne) {
    const int start = blockIdx.x * group_size + threadIdx.x;
    const int end = min(blockIdx.x * group_size + group_size, ne);
    for (int j = start; j < end; j += blockDim.x) dst[j] = 2.0f * x[j];
}"""


def test_an_extent_bounded_by_min_of_two_sizes_is_fitted_where_they_agree():
    """llama.cpp's group_norm_f32: the extent is min(num_groups * group_size, ne); moved one by
    one the sizes leave it at the given 300, a constant that holds nowhere else."""
    sizes = {"num_groups": 6, "group_size": 50, "ne": 300}
    args = [ArgProbe("x", "in", "float32"), ArgProbe("dst", "out", "float32"),
            ArgProbe("group_size", "scalar", "int32", "group_size"),
            ArgProbe("ne", "scalar", "int32", "ne")]
    probe = probe_shapes(GROUPS, "groups", "g.cu", args, sizes,
                         _launch(["num_groups"], ["32"]), find_relations(sizes))
    for at in ({"num_groups": 5, "group_size": 70, "ne": 350},
               {"num_groups": 13, "group_size": 1000, "ne": 13000}):
        assert evaluate(probe.shapes["dst"], at) == at["ne"]
        assert evaluate(probe.shapes["x"], at) == at["ne"]
    assert probe.relations == ["ne == num_groups * group_size"]


HEADS = r"""
template <int HEAD>
__global__ void heads(const int B, const int T, const int C, const int H, const float * k,
                      float * dst) {
    const int tid = threadIdx.x, b = blockIdx.x / H, h = blockIdx.x % H;
    const int n = T / B;
    float state = 0.0f;
    for (int t = b * n * C + h * HEAD + tid; t < (b + 1) * n * C + h * HEAD + tid; t += C) {
        state += k[t];
        dst[t] = state;
    }
    for (int i = 0; i < HEAD; i++)
        dst[T * C + b * C * HEAD + h * HEAD * HEAD + i * HEAD + tid] = state * i;
}"""


def test_a_layout_that_needs_the_hosts_contracts_is_fitted_over_them():
    """llama.cpp's wkv/gla: dst holds T * C outputs and then B * C * HEAD of state; size sets
    that move B alone break T % B and C == H * HEAD, and nothing fitted there."""
    sizes = {"B": 2, "T": 6, "C": 8, "H": 2}
    args = [*[ArgProbe(n, "scalar", "int32", n) for n in "BTCH"],
            ArgProbe("k", "in", "float32"), ArgProbe("dst", "out", "float32")]
    rel = find_relations(sizes, {("C", "H"), ("T", "B")}, {4})
    probe = probe_shapes(HEADS, "heads<4>", "h.cu", args, sizes,
                         _launch(["B * H"], ["C // H"]), rel)
    for at in ({"B": 3, "T": 9, "C": 12, "H": 3}, {"B": 1, "T": 5, "C": 4, "H": 1}):
        assert evaluate(probe.shapes["dst"], at) == at["T"] * at["C"] + 4 * at["B"] * at["C"]
        assert evaluate(probe.shapes["k"], at) == at["T"] * at["C"]
    assert sorted(probe.relations) == ["C == 4 * H", "T % B == 0"]


ROWS = r"""
__global__ void rows(const float * x, float * dst, const int ncols, const long stride_row) {
    for (int c = threadIdx.x; c < ncols; c += blockDim.x)
        dst[blockIdx.x * ncols + c] = x[blockIdx.x * stride_row + c];
}"""


def test_a_coincidental_relation_does_not_narrow_a_fit_that_holds_without_it():
    """stride_row == nrows * ncols here by chance: the strided fit found with the sizes moved
    one by one holds where they keep it too, so it stays general."""
    sizes = {"nrows": 4, "ncols": 10, "stride_row": 40}
    args = [ArgProbe("x", "in", "float32"), ArgProbe("dst", "out", "float32"),
            ArgProbe("ncols", "scalar", "int32", "ncols"),
            ArgProbe("stride_row", "scalar", "int64", "stride_row")]
    rel = find_relations(sizes)
    assert [r.text() for r in rel.relations][0] == "stride_row == nrows * ncols"
    probe = probe_shapes(ROWS, "rows", "rows.cu", args, sizes, _launch(["nrows"], ["32"]), rel)
    at = {"nrows": 3, "ncols": 7, "stride_row": 9}
    assert evaluate(probe.shapes["x"], at) == 2 * 9 + 7
    assert probe.relations == []  # the case does not constrain its held-out sizes by it


def test_a_buffer_the_kernel_runs_off_the_end_of_is_grown_not_given_up():
    """A run that writes past the probe's first buffers (64 Ki elements) is run again with
    larger ones (gla's dst: 66561 elements at its given sizes)."""
    big = r"""
__global__ void fill(float * dst, const int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = 1.0f;
}"""
    probe = probe_shapes(big, "fill", "f.cu", [ArgProbe("dst", "out", "float32"),
                                               ArgProbe("n", "scalar", "int32", "n")],
                         {"n": 70000}, _launch(["1"], ["256"]))
    assert probe.shapes["dst"] == "n"


def test_an_extent_that_moves_with_the_data_is_not_taken_as_the_shape():
    """torch-cluster's radius writes one slot per neighbour found: the extent two runs reach
    differs, so no measured number stands for it (the flat guess stays, said why)."""
    found = r"""
__global__ void found(const float * x, int * out, const int n) {
    int count = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > 0.5f) out[count++] = i;
}"""
    probe = probe_shapes(found, "found", "r.cu", [
        ArgProbe("x", "in", "float32"), ArgProbe("out", "out", "int32"),
        ArgProbe("n", "scalar", "int32", "n")], {"n": 300}, _launch(["1"], ["1"]))
    assert "out" not in probe.shapes and "out" not in probe.base
    assert "moves with the data" in probe.unfitted["out"]


SEGMENTS = r"""
__global__ void nearest_sum(const float * y, const long * ptr_x, const long * ptr_y,
                            float * out, const long batch_size, const long dim) {
    const long n_x = blockIdx.x;
    long b = 0;
    for (long i = 0; i < batch_size; i++) {
        if (n_x >= ptr_x[i] && n_x < ptr_x[i + 1]) { b = i; break; }
    }
    const long end = ptr_y[b + 1];
    float acc = 0.0f;
    for (long n_y = ptr_y[b]; n_y < end; n_y++)
        for (long d = 0; d < dim; d++) acc += y[n_y * dim + d];
    out[n_x] = acc;
}"""


def test_offsets_are_read_from_the_kernel_body():
    reads = read_kernel(SEGMENTS, "nearest_sum", ["y", "ptr_x", "ptr_y", "out", "batch_size",
                                                  "dim"], ["ptr_x", "ptr_y"])
    by = {o.name: o for o in reads.offsets}
    assert by["ptr_y"].loop and not by["ptr_x"].loop  # ptr_y bounds a loop over y's rows
    assert by["ptr_x"].coordinate == ("block", 0)  # ptr_x's segments hold blockIdx.x
    assert read_kernel(HEADS, "heads<4>", list("BTCH") + ["k", "dst"], []).quotients == {
        ("T", "B")}


def test_offsets_in_the_probe_give_their_count_and_size_what_they_index():
    """torch-cluster's nearest: with random indices ptr_y measured batch_size + 2; filled with
    sorted offsets it is read at batch_size + 1, and y at the M rows ptr_y ends at."""
    args = [ArgProbe("y", "in", "float32"), ArgProbe("ptr_x", "in", "int64", offsets="N"),
            ArgProbe("ptr_y", "in", "int64", offsets="M"), ArgProbe("out", "out", "float32"),
            ArgProbe("batch_size", "scalar", "int64", "batch_size"),
            ArgProbe("dim", "scalar", "int64", "dim")]
    probe = probe_shapes(SEGMENTS, "nearest_sum", "n.cu", args,
                         {"N": 30, "M": 20, "batch_size": 3, "dim": 2},
                         _launch(["N"], ["1"]))
    at = {"N": 7, "M": 50, "batch_size": 5, "dim": 4}
    assert evaluate(probe.shapes["ptr_x"], at) == 6
    assert evaluate(probe.shapes["ptr_y"], at) == 6
    assert evaluate(probe.shapes["y"], at) == 50 * 4


def test_csr_offsets_are_sorted_and_span_zero_to_the_end():
    rng = np.random.default_rng(0)
    for count, end in ((4, 40), (6, 3), (2, 0), (1, 9)):
        p = csr_offsets(count, end, rng)
        assert len(p) == count and p[0] == 0 and np.all(np.diff(p) >= 0)
        assert count < 2 or p[-1] == end


def test_a_guessed_case_keeps_its_relations_and_fills_offsets(tmp_path):
    """Through `kport port`'s case guess: the second size set and check.constraints keep
    ne == num_groups * group_size; offsets get init offsets:END and make_inputs fills them."""
    from agent.case_guess import guess_case
    from corpus.check import make_inputs

    (tmp_path / "g.cu").write_text(GROUPS)
    case, _ = guess_case(tmp_path / "g.cu", "groups", tmp_path / "g",
                         sizes={"num_groups": 9, "group_size": 300, "ne": 2700},
                         grid=["num_groups"], block=["32"])
    assert case.check.constraints == ["ne == num_groups * group_size"]
    (variant,) = case.variants
    full = {**case.sizes, **variant}
    assert full["ne"] == full["num_groups"] * full["group_size"] != 2700
    assert [a.shape for a in case.args if a.name == "dst"] == [["ne"]]

    (tmp_path / "s.cu").write_text(SEGMENTS)
    case, _ = guess_case(tmp_path / "s.cu", "nearest_sum", tmp_path / "s",
                         sizes={"N": 30, "M": 20, "batch_size": 3, "dim": 2},
                         grid=["N"], block=["1"])
    by = {a.name: a for a in case.args}
    assert (by["ptr_x"].init, by["ptr_y"].init) == ("offsets:N", "offsets:M")
    assert by["ptr_y"].shape == ["batch_size + 1"] and by["y"].shape == ["M * dim"]
    ptr_y = make_inputs(case, case.sizes, 0)["ptr_y"]
    assert ptr_y[0] == 0 and ptr_y[-1] == 20 and np.all(np.diff(ptr_y) >= 0)
