"""llama.cpp's CUDA kernels where they sit (ggml/src/ggml-cuda in the llama-cpp-python sdist,
pinned in tests/conformance/expert_sources.py), read with only the flags a user would type: the
include folders of llama.cpp's own build (issue 15). Each kernel's device code, cut from its
tree, runs in cuda_sim and is checked against numpy written from the kernel's documented
semantics, at sizes of this test's choosing; the translator reads the same tree."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest

from agent.case_guess import device_code
from runners.cuda_sim import RawKernel
from tests.cli import kport
from tests.conformance import expert_sources
from tests.tiers import sampled

GGML = "vendor/llama.cpp/ggml"


@pytest.fixture(scope="module")
def ggml():
    try:
        root = expert_sources.fetch(expert_sources.LLAMA_CPP, GGML + "/") / GGML
    except expert_sources.SourcesUnavailable as err:
        pytest.skip(f"llama.cpp sources unavailable: {err}")
    return root


def _flags(ggml):
    return ["-I", str(ggml / "include"), "-I", str(ggml / "src")]


@pytest.mark.parametrize("kernel,file", [("op_clamp_kernel<float>", "clamp.cu"),
                                         ("group_norm_f32<256>", "norm.cu"),
                                         ("reduce_rows_f32<false>", "sumrows.cu"),
                                         ("arange_f32", "arange.cu")])
def test_translate_reads_the_kernel_in_its_tree(ggml, kernel, file):
    proc = kport("translate", str(ggml / "src" / "ggml-cuda" / file), "--kernel", kernel,
                 *_flags(ggml), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["outputs"], out
    assert all(t["file"] for t in out["todos"])  # each TODO names the file it is in


@pytest.mark.parametrize("groups,group_size", [(4, 1000), (3, 77)])
def test_group_norm_cut_from_its_tree_is_correct(ggml, groups, group_size):
    """group_norm_f32<256>: each group of ``group_size`` consecutive values normalised to mean 0
    and variance 1 (eps 1e-6); one block of 256 threads per group, 2 x 32 floats of dynamic
    shared memory for block_reduce's two passes (as ggml_cuda_op_group_norm launches it)."""
    code, view = device_code(ggml / "src" / "ggml-cuda" / "norm.cu", "group_norm_f32<256>",
                             [ggml / "include", ggml / "src"])
    assert "common.cuh" in view.files and "ggml_cuda_op_group_norm" not in code
    rng = np.random.default_rng(groups)
    x = rng.standard_normal(groups * group_size).astype(np.float32) * 3 + 1
    y = np.zeros_like(x)
    run = RawKernel(code, "group_norm_f32<256>", filename="norm.device.cu").launch(
        (groups, 1, 1), (256, 1, 1), [x, y, np.int32(group_size), np.int32(x.size),
                                       np.float32(1e-6)], shared_mem=64 * 4)
    assert run.ok, [str(d) for d in run.diagnostics] + [str(f) for f in run.findings]
    xg = x.reshape(groups, group_size).astype(np.float64)
    want = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y.reshape(groups, group_size), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("nrows,ncols,block", [(5, 3000, 512), (7, 100, 32), (3, 1500, 128)])
def test_sum_rows_cut_from_its_tree_is_correct(ggml, nrows, ncols, block):
    """reduce_rows_f32<false> (sumrows.cu includes reduce_rows.cuh): each row's sum, one block
    per row; the three block sizes sum_rows_f32_cuda picks."""
    code, _ = device_code(ggml / "src" / "ggml-cuda" / "sumrows.cu", "reduce_rows_f32<false>",
                          [ggml / "include", ggml / "src"])
    x = np.random.default_rng(ncols).standard_normal((nrows, ncols)).astype(np.float32)
    y = np.zeros(nrows, np.float32)
    run = RawKernel(code, "reduce_rows_f32<false>", filename="sumrows.device.cu").launch(
        (nrows, 1, 1), (block, 1, 1), [x, y, np.int32(ncols)])
    assert run.ok, [str(d) for d in run.diagnostics] + [str(f) for f in run.findings]
    np.testing.assert_allclose(y, x.astype(np.float64).sum(-1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("spec", sampled(
    [("op_clamp_kernel<float>", "clamp.cu", "k"), ("arange_f32", "arange.cu", "ne0")],
    ["clamp", "arange"], every=2))
def test_port_takes_the_launch_from_the_host_code(ggml, tmp_path, spec):
    """`kport port FILE --kernel K -I ...` and nothing else: the launch (grid, block, shared
    memory) and the size names come from the host function that launches the kernel."""
    kernel, file, size = spec
    out = tmp_path / "pkg"
    proc = kport("port", str(ggml / "src" / "ggml-cuda" / file), "--kernel", kernel,
                 *_flags(ggml), "--offline", "--no-kb", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads((out / "report.json").read_text())
    launch = next(g for g in rep["guessed"] if g.startswith("CUDA launch from the host code"))
    assert f"at {file}:" in launch
    assert list(tomllib.loads((out / "case.guessed.toml").read_text())["sizes"]) == [size]
