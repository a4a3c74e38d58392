"""Search over a KB holding CUDA/Metal pairs (kb/search.py): the two sides of a pair are one
hit, and a CUDA kernel whose own Metal port is stored finds it ahead of the pairs of sibling
ops (quantization variants whose CUDA code is nearly its own)."""

import pytest

from kb.chunks import pair
from kb.ingest import code_chunks
from kb.search import search
from kb.store import KBStore

CUDA = """
__global__ void dequantize_mul_mat_vec_{v}(const float* vx, const float* y, float* dst,
                                           const int ncols) {{
    const int row = blockIdx.x;
    float tmp = 0.0f;
    for (int i = threadIdx.x; i < ncols; i += 32) tmp += vx[row * ncols + i] * y[i] * {scale}f;
    for (int o = 16; o > 0; o >>= 1) tmp += __shfl_xor_sync(0xffffffff, tmp, o);
    if (threadIdx.x == 0) dst[row] = tmp;
}}
"""
METAL = """
kernel void kernel_mul_mv_{v}_f32(device const float* src0, device const float* src1,
        device float* dst, constant int& ne00, uint r0 [[threadgroup_position_in_grid]],
        uint tiisg [[thread_index_in_simdgroup]]) {{
    float sumf = 0.0f;
    for (int i = tiisg; i < ne00; i += 32) sumf += src0[r0 * ne00 + i] * src1[i] * {scale}f;
    sumf = simd_sum(sumf);
    if (tiisg == 0) dst[r0] = sumf;
}}
"""
SIBLINGS = {"q4_1": "0.5", "q5_1": "0.25", "q8_1": "0.125", "q2_k": "0.75"}


def _cuda(v: str, scale: str):
    return code_chunks(CUDA.format(v=v, scale=scale), "cuda", f"{v}.cu", "t")[0]


def _metal(v: str, scale: str):
    return code_chunks(METAL.format(v=v, scale=scale), "metal", f"{v}.metal", "t")[0]


@pytest.fixture(scope="module")
def pairs_store(tmp_path_factory):
    """The pairs of four sibling ops, and the Metal port of q4_0 without its CUDA side."""
    store = KBStore(tmp_path_factory.mktemp("pairs") / "kb", create=True)
    chunks = [c for v, s in SIBLINGS.items() for c in pair(_cuda(v, s), _metal(v, s))]
    store.add(chunks + [_metal("q4_0", "2.0")])
    return store


def test_a_cuda_kernel_finds_its_own_port_ahead_of_sibling_pairs(pairs_store, tmp_path):
    query = CUDA.format(v="q4_0", scale="2.0")
    hits = search(pairs_store, query, kinds=["analogues"], k=3, cache_root=tmp_path)
    assert hits[0].metadata["kernel"] == "kernel_mul_mv_q4_0_f32"
    assert "port" in hits[0].ranks  # found by the name its port goes by
    assert all("port" not in h.ranks for h in hits[1:])  # q4_1 is another variant, not a port


def test_the_two_sides_of_a_pair_are_one_hit(pairs_store, tmp_path):
    query = CUDA.format(v="q4_1", scale="0.5")
    hits = search(pairs_store, query, kinds=["analogues"], k=5, cache_root=tmp_path)
    assert len(hits) == 5
    sides = [h.id for h in hits] + [h.pair["id"] for h in hits if h.pair]
    assert len(sides) == len(set(sides)), [h.title for h in hits]
    first = hits[0]  # its own pair: one hit, the other side carried along
    kernels = {first.metadata["kernel"], first.pair["metadata"]["kernel"]}
    assert kernels == {"dequantize_mul_mat_vec_q4_1", "kernel_mul_mv_q4_1_f32"}
