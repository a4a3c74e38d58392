"""What a launch computes through the host code's own functions, and a --kernel that names a
host function (issue 16, llama.cpp's argsort.cu): a helper of one integer (``next_power_of_2``)
read as the size function it computes, by running it in cuda_sim (agent/host_consts.py); a
host function's error naming what it launches and the CUB device-wide algorithms it calls
(agent/translate/host_functions.py)."""

import json
import textwrap
import tomllib

import numpy as np
import pytest

from agent.host_consts import constant_compiler
from agent.host_launch import find_launches
from runners.sizeexpr import SizeExprError, evaluate
from tests.cli import kport, load_package

DEVICE = textwrap.dedent("""\
    __global__ void pad_rows(const float *x, float *y, const int ncols, int ncols_pad) {
        extern __shared__ float row[];
        for (int c = threadIdx.x; c < ncols_pad; c += blockDim.x)
            row[c] = c < ncols ? x[blockIdx.x * ncols + c] : -1.0f;
        __syncthreads();
        for (int c = threadIdx.x; c < ncols; c += blockDim.x)
            y[blockIdx.x * ncols + c] = row[ncols_pad - 1 - c];
    }
    """)
HOST = textwrap.dedent("""\
    static int next_power_of_2(int x) {
        int n = 1;
        while (n < x) {
            n *= 2;
        }
        return n;
    }
    static int plus_one(int x) { return x + 1; }
    void pad_rows_cuda(const float *x, float *y, const int ncols, const int nrows,
                       cudaStream_t stream) {
        const int ncols_pad = next_power_of_2(ncols);
        const dim3 block(ncols_pad < 256 ? ncols_pad : 256, 1, 1);
        pad_rows<<<nrows, block, ncols_pad * sizeof(float), stream>>>(x, y, ncols, ncols_pad);
    }
    void pad_rows_odd(const float *x, float *y, const int ncols, const int nrows) {
        pad_rows<<<nrows, 32, plus_one(ncols) * sizeof(float)>>>(x, y, ncols, plus_one(ncols));
    }
    """)


def test_next_pow2_is_the_smallest_power_of_two_at_least_n():
    assert [evaluate(f"next_pow2({n})", {}) for n in (1, 2, 3, 4, 5, 1000, 1024, 1025)] == \
        [1, 2, 4, 4, 8, 1024, 1024, 2048]
    with pytest.raises(SizeExprError, match="next_pow2 takes one integer of at least 1"):
        evaluate("next_pow2(0)", {})


def test_a_host_helper_of_one_integer_is_read_as_the_size_function_it_computes():
    constants = constant_compiler(DEVICE, "pad.cu")
    pow2, odd = find_launches(DEVICE + HOST, "pad_rows", (), {"ncols": 1, "nrows": 1},
                              constants)
    assert pow2.usable, pow2.problems
    for ncols, pad in [(1, 1), (3, 4), (300, 512), (1000, 1024), (1025, 2048)]:
        sizes = {"ncols": ncols, "nrows": 5}
        assert [evaluate(b, sizes) for b in pow2.block] == [min(pad, 256), 1, 1]
        assert evaluate(pow2.shared_mem, sizes) == pad * 4
        assert evaluate(pow2.args[3], sizes) == pad  # the kernel's ncols_pad
    # x + 1 is no size function kport has: that launch stays unread, and says why
    assert odd.shared_mem is None and any(
        "plus_one() is a host function that is no size function" in p and
        "plus_one(1000) = 1001" in p for p in odd.problems), odd.problems


def test_without_a_compiler_a_host_helper_is_unread():
    (pow2, _) = find_launches(DEVICE + HOST, "pad_rows", (), {"ncols": 1, "nrows": 1})
    assert pow2.block is None and any("next_power_of_2() is a host function" in p
                                      for p in pow2.problems), pow2.problems


def test_a_port_takes_the_launch_through_the_helper_and_holds_at_other_sizes(tmp_path):
    src = tmp_path / "pad.cu"
    src.write_text(DEVICE + HOST)
    out = tmp_path / "pkg"
    proc = kport("port", str(src), "--kernel", "pad_rows", "--size", "ncols=300",
                 "--size", "nrows=3", "--offline", "--no-kb", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    case = tomllib.loads((out / "case.guessed.toml").read_text())
    assert "next_pow2(ncols)" in case["cuda"]["shared_mem"]
    assert list(case["sizes"]) == ["ncols", "nrows"]  # ncols_pad is no size: it is computed
    rep = json.loads((out / "report.json").read_text())
    assert any(g.startswith("CUDA launch from the host code: pad_rows_cuda")
               for g in rep["guessed"]), rep["guessed"]
    module = load_package(out, "pad_rows_helper")
    x = np.arange(5 * 33, dtype=np.float32)
    y = module.as_numpy("y", module.run(x=x, ncols=33, nrows=5)["y"]).reshape(5, 33)
    padded = np.concatenate([x.reshape(5, 33), -np.ones((5, 31), np.float32)], axis=1)
    np.testing.assert_array_equal(y, padded[:, ::-1][:, :33])  # 31 pads, then x[32], x[31]


def test_an_unread_helper_is_named_in_the_port_error(tmp_path):
    """The only launch goes through a helper that is no size function, and one thread per
    element of these sizes is too many to guess: the error says what the helper computes,
    not that no compiler was there."""
    src = tmp_path / "odd.cu"
    src.write_text(DEVICE + HOST[HOST.index("static int plus_one"):HOST.index("void pad_rows_cuda")]
                   + HOST[HOST.index("void pad_rows_odd"):])
    proc = kport("port", str(src), "--kernel", "pad_rows", "--size", "ncols=5000", "--size",
                 "nrows=5000", "--offline", "--no-kb", "--out", str(tmp_path / "pkg"))
    assert proc.returncode == 2
    assert "plus_one() is a host function that is no size function" in proc.stderr and \
        "plus_one(1000) = 1001" in proc.stderr and "pass --grid/--block" in proc.stderr, \
        proc.stderr


SORTS = textwrap.dedent("""\
    #include <cub/cub.cuh>
    using namespace cub;
    __global__ void init_indices(int *indices, const int ncols, const int nrows) {
        const int col = blockIdx.x * blockDim.x + threadIdx.x;
        if (col < ncols && blockIdx.y < nrows) indices[blockIdx.y * ncols + col] = col;
    }
    void argsort_rows(const float *keys, float *keys_out, int *idx, int *dst, int *offsets,
                      int ncols, int nrows, void *tmp, size_t &tmp_bytes, cudaStream_t s) {
        init_indices<<<dim3((ncols + 255) / 256, nrows), 256, 0, s>>>(idx, ncols, nrows);
        DeviceSegmentedSort::SortPairs(tmp, tmp_bytes, keys, keys_out, idx, dst, ncols * nrows,
                                       nrows, offsets, offsets + 1, s);
    }
    void nothing(int n) {}
    """)


@pytest.mark.parametrize("kernel, says", [
    ("argsort_rows", ["sorts.cu:7: argsort_rows is a host function, not a __global__ kernel",
                      "cub::DeviceSegmentedSort::SortPairs", "mx.argsort",
                      "launches init_indices; port that kernel with --kernel NAME"]),
    ("nothing", ["sorts.cu:13: nothing is a host function", "(init_indices)"]),
])
def test_a_host_function_named_as_the_kernel_is_refused_in_one_line(tmp_path, kernel, says):
    src = tmp_path / "sorts.cu"
    src.write_text(SORTS)
    proc = kport("port", str(src), "--kernel", kernel, "--offline", "--no-kb", "--out",
                 str(tmp_path / "pkg"))
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and all(s in lines[0] for s in says), proc.stderr
