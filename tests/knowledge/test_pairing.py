"""Pairing the CUDA and Metal kernels of a tree by op name and content (kb/pairing.py), on
candle's and llama.cpp's real kernel trees and on small kernels written to differ."""

import json

import pytest

from kb.ingest import code_chunks, ingest
from kb.pairing import name_key, name_score, pair_kernels
from tests.conformance import expert_sources

SOFTMAX_CU = """
__global__ void soft_max_f32(const float* x, float* y, const int ncols) {
    __shared__ float buf[32];
    const int row = blockIdx.x;
    float row_max = -INFINITY;
    for (int col = threadIdx.x; col < ncols; col += blockDim.x)
        row_max = fmaxf(row_max, x[row * ncols + col]);
    for (int o = 16; o > 0; o >>= 1)
        row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffff, row_max, o));
    __syncthreads();
    float row_sum = 0.0f;
    for (int col = threadIdx.x; col < ncols; col += blockDim.x) {
        const float e = expf(x[row * ncols + col] - row_max);
        y[row * ncols + col] = e;
        row_sum += e;
    }
    for (int col = threadIdx.x; col < ncols; col += blockDim.x) y[row * ncols + col] /= row_sum;
}
"""
SOFTMAX_METAL = """
kernel void kernel_soft_max(device const float* x, device float* y, constant int& ncols,
        uint row [[threadgroup_position_in_grid]], uint tid [[thread_position_in_threadgroup]]) {
    threadgroup float buf[32];
    float row_max = -INFINITY;
    for (int col = tid; col < ncols; col += 32) row_max = max(row_max, x[row * ncols + col]);
    row_max = simd_max(row_max);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float row_sum = 0.0f;
    for (int col = tid; col < ncols; col += 32) {
        const float e = exp(x[row * ncols + col] - row_max);
        y[row * ncols + col] = e;
        row_sum += e;
    }
    for (int col = tid; col < ncols; col += 32) y[row * ncols + col] /= row_sum;
}
"""
# named like a softmax, but counts values into bins with atomics
HISTOGRAM_NAMED_SOFTMAX = """
kernel void kernel_soft_max(device const uint* values, device atomic_uint* bins,
        constant uint& nbins, uint gid [[thread_position_in_grid]]) {
    const uint bucket = values[gid] % nbins;
    atomic_fetch_add_explicit(&bins[bucket], 1u, memory_order_relaxed);
}
"""


def _kernels(tree, language):
    return [c for c in ingest(tree, "t")[0] if c.metadata.get("language") == language]


def test_name_key_drops_prefixes_types_and_spelling():
    assert name_key("kernel_soft_max_f32") == name_key("softmax_f16") == {"softmax"}
    assert name_key("dequantize_mul_mat_vec_q4_0_cuda") >= name_key("kernel_mul_mv_q4_0_f32")


def test_names_of_other_variants_do_not_match():
    assert name_score("dequantize_mul_mat_vec_q8_0_cuda", "kernel_mul_mv_q2_0_f32") == 0.0
    assert name_score("conv_transpose_1d_kernel", "kernel_conv_transpose_2d") == 0.0
    assert name_score("dequantize_mul_mat_vec_q8_0_cuda", "kernel_mul_mv_q8_0_f32") >= 0.5


def test_names_alike_with_other_content_are_not_paired():
    cuda = code_chunks(SOFTMAX_CU, "cuda", "s.cu", "t")
    wrong = code_chunks(HISTOGRAM_NAMED_SOFTMAX, "metal", "h.metal", "t")
    chunks, report = pair_kernels(cuda, wrong)
    assert not any("pair_id" in c.metadata for c in chunks)
    assert report.paired == 0 and report.refused[0][:2] == ("soft_max_f32", "kernel_soft_max")
    assert "1 name matches refused for different content" in report.line()
    right = code_chunks(SOFTMAX_METAL, "metal", "s.metal", "t")
    chunks, report = pair_kernels(cuda, right)
    c = next(c for c in chunks if c.metadata["kernel"] == "soft_max_f32")
    assert c.metadata["pair_how"] == "name+content" and "exp" in c.metadata["pair_reason"]
    assert report.line() == ("1 CUDA kernels, 1 Metal kernels, 1 paired (by name+content: 1, "
                             "by content only: 0), 0 unpaired")


def test_pairs_by_content_when_names_differ():
    cuda = code_chunks(SOFTMAX_CU.replace("soft_max_f32", "fused_rowwise_f32"), "cuda", "a.cu",
                       "t")
    metal = code_chunks(SOFTMAX_METAL.replace("kernel_soft_max", "kernel_mystery"), "metal",
                        "b.metal", "t")
    chunks, report = pair_kernels(cuda, metal)
    assert (report.by_content, report.by_name_and_content) == (1, 0)
    assert chunks[0].metadata["pair_how"] == "content"
    assert "names differ" in chunks[0].metadata["pair_reason"]


def test_pairs_candles_real_kernel_trees():
    try:
        cuda_dir, metal_dir = expert_sources.candle_kernel_trees()
    except expert_sources.SourcesUnavailable as err:
        pytest.skip(f"candle-nn sdist unavailable: {err}")
    chunks, report = pair_kernels(_kernels(cuda_dir, "cuda"), _kernels(metal_dir, "metal"))
    assert (report.cuda, report.metal) == (30, 69)
    pairs = {c.metadata["kernel"]: c for c in chunks if c.metadata.get("pair_role") == "cuda"}
    by_id = {c.id: c for c in chunks}
    assert report.paired == len(pairs) >= 10
    q4 = pairs["dequantize_mul_mat_vec_q4_0_cuda"]
    assert by_id[q4.metadata["pair_id"]].metadata["kernel"] == "kernel_mul_mv_q4_0_f32"
    assert q4.metadata["pair_how"] == "name+content" and q4.metadata["pair_confidence"] > 0.5


@pytest.mark.slow  # parses all of llama.cpp's ggml-cuda and ggml-metal (tests/tiers.py)
def test_pairs_llama_cpps_real_kernel_trees():
    try:
        root = expert_sources.fetch(expert_sources.LLAMA_CPP, "vendor/llama.cpp/ggml/")
    except expert_sources.SourcesUnavailable as err:
        pytest.skip(f"llama-cpp-python sdist unavailable: {err}")
    src = root / "vendor" / "llama.cpp" / "ggml" / "src"
    chunks, report = pair_kernels(_kernels(src / "ggml-cuda", "cuda"),
                                  _kernels(src / "ggml-metal", "metal"))
    by_id = {c.id: c for c in chunks}
    pairs = {c.metadata["kernel"]: by_id[c.metadata["pair_id"]].metadata["kernel"]
             for c in chunks if c.metadata.get("pair_role") == "cuda"}
    assert pairs["soft_max_f32"] == "kernel_soft_max" and pairs["rope_neox"] == "kernel_rope_neox"
    assert "norm_f32" not in pairs or pairs["norm_f32"] != "kernel_rope_norm"
    assert ("norm_f32", "kernel_rope_norm") in {r[:2] for r in report.refused}
    assert report.paired >= 50


def test_add_bad_input_is_one_line(cli, fresh_home, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = cli("kb", "add", str(empty), home=fresh_home)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{empty}: no file to add" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    cu, mt = tmp_path / "cuda", tmp_path / "metal"
    cu.mkdir()
    mt.mkdir()
    (cu / "s.cu").write_text(SOFTMAX_CU)
    (mt / "notes.md").write_text("# Notes\n\nNo kernels here.\n")
    proc = cli("kb", "add-pairs", str(cu), str(mt), home=fresh_home)
    assert proc.returncode == 2 and f"{mt}: no Metal kernel" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (fresh_home / "kb").exists()  # refused before the store is opened


@pytest.mark.slow  # kb writes end to end (tests/tiers.py)
def test_kb_add_pairs_a_mixed_tree_and_says_how(cli, fresh_home, tmp_path):
    (tmp_path / "cuda").mkdir()
    (tmp_path / "metal").mkdir()
    (tmp_path / "cuda" / "softmax.cu").write_text(SOFTMAX_CU)
    (tmp_path / "metal" / "softmax.metal").write_text(SOFTMAX_METAL)
    (tmp_path / "cuda" / "other.cu").write_text(SOFTMAX_CU.replace("soft_max_f32",
                                                                   "scatter_rows_i32"))
    proc = cli("kb", "add", str(tmp_path), "--json", home=fresh_home)
    assert proc.returncode == 0, proc.stderr
    assert ("2 CUDA kernels, 1 Metal kernels, 1 paired (by name+content: 1, by content only: 0)"
            ", 1 unpaired; 1 unpaired CUDA kernels left out") in " ".join(proc.stderr.split())
    out = json.loads(proc.stdout)
    assert out["pairs"] == 1 and out["pairing"]["by_name_and_content"] == 1
    assert out["added"] == 2  # the unpaired CUDA kernel is not stored
    proc = cli("kb", "add", str(tmp_path), "--keep-unpaired", "--json", home=fresh_home)
    assert json.loads(proc.stdout)["added"] == 1
    hit = json.loads(cli("kb", "search", "soft_max_f32", "--kind", "analogues", "--language",
                         "cuda", "-k", "1", "--json", home=fresh_home).stdout)[0]
    assert hit["pair"]["metadata"]["kernel"] == "kernel_soft_max"
    assert hit["metadata"]["pair_how"] == "name+content"
