"""Ingestion: kernels with their callees, features, content-hash ids, skipped files, pairs."""

from pathlib import Path

import pytest

import kb.ingest as ingest_mod
from corpus.cases import discover
from kb.ingest import corpus_chunks, ingest, pair_chunks

SOFTMAX = """
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__global__ void softmax_rows(const float* x, float* y, int n) {
  __shared__ float red[32];
  float m = warp_max(x[threadIdx.x]);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  y[threadIdx.x] = expf(x[threadIdx.x] - red[0]);
}
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "sub").mkdir(parents=True)
    (root / "softmax.cu").write_text(SOFTMAX)
    (root / "common.cuh").write_text("__device__ float helper(float v) { return v * 2.0f; }\n")
    (root / "sub" / "use.cu").write_text(
        "__global__ void scale_rows(float* y) { y[threadIdx.x] = helper(y[threadIdx.x]); }\n")
    (root / "sub" / "hist.metal").write_text(
        "kernel void kernel_hist(device atomic_uint* h [[buffer(0)]], uint i "
        "[[thread_position_in_grid]]) {\n  atomic_fetch_add_explicit(&h[i % 16], 1u, "
        "memory_order_relaxed);\n}\n")
    (root / "notes.md").write_text("# Notes\n\nsome text\n")
    (root / "blob.cu").write_bytes(b"\x7fELF\x00\x01binary")
    (root / "latin1.cu").write_bytes("// caf\xe9\n".encode("latin-1"))
    (root / "garbage.cu").write_text(")))) ]]]] {{{{ !!!! ;;;; " * 40)
    (root / "readme.txt").write_text("ignored")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "x.cu").write_text("__global__ void hidden() {}")
    return root


def test_folder_ingest_counts_skips_and_features(tmp_path):
    chunks, report = ingest(_tree(tmp_path), "src")
    skipped = {Path(p).name: why for p, why in report.skipped}
    assert set(skipped) == {"blob.cu", "latin1.cu", "garbage.cu"}
    assert "binary" in skipped["blob.cu"] and "UTF-8" in skipped["latin1.cu"]
    assert "malformed" in skipped["garbage.cu"]
    assert report.ignored == 1 and report.files == 5
    by_kernel = {c.metadata.get("kernel"): c for c in chunks}
    assert set(by_kernel) == {"softmax_rows", "scale_rows", "kernel_hist", None}
    soft = by_kernel["softmax_rows"]
    assert "warp_max" in soft.text and soft.text.index("warp_max") < soft.text.index("softmax_rows")
    m = soft.metadata
    assert (m["f_shared"], m["f_warp"], m["f_barrier"], m["f_atomics"]) == (True, True, True, False)
    assert m["category"] == "softmax" and "__shfl_xor_sync" in m["intrinsics"]
    assert "helper" in by_kernel["scale_rows"].text  # from another file of the same add
    hist = by_kernel["kernel_hist"].metadata
    assert hist["language"] == "metal" and hist["f_atomics"] and hist["category"] == "atomic"
    assert by_kernel[None].collection == "docs"


def test_ids_are_content_hashes(tmp_path):
    a, _ = ingest(_tree(tmp_path), "src")
    b, _ = ingest(tmp_path / "src", "src")
    assert [c.id for c in a] == [c.id for c in b]
    assert len({c.id for c in a}) == len(a)


def test_huge_files_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest_mod, "MAX_FILE_BYTES", 100)
    (tmp_path / "big.cu").write_text(SOFTMAX)
    chunks, report = ingest(tmp_path)
    assert not chunks and "too big" in report.skipped[0][1]


def test_pairs_by_kernel_name():
    from kb.ingest import code_chunks

    cuda = code_chunks("__global__ void soft_max_f32(float* x) { x[0] = 0; }\n"
                       "__global__ void rms_norm_f32(float* x) { x[0] = 1; }\n", "cuda", "a.cu",
                       "s")
    metal = code_chunks("kernel void kernel_soft_max(device float* x) { x[0] = 0; }\n"
                        "kernel void kernel_argsort(device float* x) { x[0] = 0; }\n", "metal",
                        "a.metal", "s")
    out = {c.metadata["kernel"]: c for c in pair_chunks(cuda, metal)}
    assert out["soft_max_f32"].metadata["pair_id"] == out["kernel_soft_max"].id
    assert out["kernel_soft_max"].metadata["pair_id"] == out["soft_max_f32"].id
    assert "pair_id" not in out["rms_norm_f32"].metadata
    assert "pair_id" not in out["kernel_argsort"].metadata


def test_every_corpus_case_becomes_a_pair():
    chunks = corpus_chunks()
    cases = [c for c in discover() if c.metal is not None]
    cuda = [c for c in chunks if c.metadata.get("pair_role") == "cuda"]
    assert len(cuda) == len(cases)
    assert {c.metadata["case"] for c in cuda} == {c.id for c in cases}
    for c in cuda:
        assert c.metadata["category"] in {case.category for case in cases}


@pytest.mark.parametrize("name,expected", [("rms_norm_f32", "norm"),
                                           ("kernel_flash_attn_ext_vec", "attention"),
                                           ("k_get_rows_float", "gather"),
                                           ("mul_mat_vec_q", "gemv")])
def test_category_guess(name, expected):
    from kb.features import guess_category

    assert guess_category(name) == expected
