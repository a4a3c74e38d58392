"""cuda_sim warp primitives against PTX/CUDA semantics computed here: shuffles (with segment
widths), votes, __activemask, warp reductions, match, and cooperative groups tiles."""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel

SHUFFLE_CODE = r"""
extern "C" __global__ void shuffles(int* out, float* fout, double* dout, int src, int delta,
                                    int width) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int v = t * 10 + 7;
  int* o = out + 8 * t;
  o[0] = __shfl_sync(0xffffffffu, v, src, width);
  o[1] = __shfl_up_sync(0xffffffffu, v, delta, width);
  o[2] = __shfl_down_sync(0xffffffffu, v, delta, width);
  o[3] = __shfl_xor_sync(0xffffffffu, v, delta, width);
  o[4] = __shfl_sync(0xffffffffu, v, src);
  o[5] = __shfl_up_sync(0xffffffffu, v, delta);
  o[6] = __shfl_down_sync(0xffffffffu, v, delta);
  o[7] = __shfl_xor_sync(0xffffffffu, v, delta);
  fout[t] = __shfl_down_sync(0xffffffffu, t * 0.25f, delta, width);
  dout[t] = __shfl_xor_sync(0xffffffffu, t * 0.125 + 1e10, delta, width);
}
"""


def _shuffle_sources(lane: np.ndarray, src: int, delta: int, width: int) -> dict:
    """Source lane of each shuffle kind, or the own lane where CUDA keeps the own value."""
    start = lane & ~(width - 1)
    end = start + width - 1
    up, down, xor = lane - delta, lane + delta, lane ^ delta
    return {
        "idx": start + (src % 32) % width,
        "up": np.where(up >= start, up, lane),
        "down": np.where(down <= end, down, lane),
        # Lanes may read earlier segments but not later ones (CUDA programming guide, shfl_xor).
        "xor": np.where(xor <= end, xor, lane),
    }


@pytest.mark.parametrize("src, delta, width", [
    (5, 1, 32),
    (3, 2, 16),
    (9, 3, 8),
    (33, 4, 16),  # source lane beyond the warp wraps modulo the width
    (0, 8, 8),  # xor mask as large as the segment: only later segments read earlier ones
    (31, 16, 32),
    (1, 1, 2),
    (2, 0, 4),
])
def test_shuffles_with_and_without_width(src, delta, width):
    threads, blocks = 64, 2
    n = threads * blocks
    out = np.zeros(8 * n, dtype=np.int32)
    fout = np.zeros(n, dtype=np.float32)
    dout = np.zeros(n, dtype=np.float64)
    RawKernel(SHUFFLE_CODE, "shuffles")((blocks,), (threads,),
                                        (out, fout, dout, np.int32(src), np.int32(delta),
                                         np.int32(width)))
    t = np.arange(n)
    warp_base = t - t % 32
    lane = t % 32
    seg = _shuffle_sources(lane, src, delta, width)
    full = _shuffle_sources(lane, src, delta, 32)
    v = t * 10 + 7
    expected = np.stack([v[warp_base + seg["idx"]], v[warp_base + seg["up"]],
                         v[warp_base + seg["down"]], v[warp_base + seg["xor"]],
                         v[warp_base + full["idx"]], v[warp_base + full["up"]],
                         v[warp_base + full["down"]], v[warp_base + full["xor"]]], axis=1)
    np.testing.assert_array_equal(out.reshape(n, 8), expected)
    np.testing.assert_array_equal(fout, (warp_base + seg["down"]) * np.float32(0.25))
    np.testing.assert_array_equal(dout, (warp_base + seg["xor"]) * 0.125 + 1e10)


def test_shuffle_butterfly_sum_of_float_is_exact():
    code = r"""
    extern "C" __global__ void warp_sum(const float* x, float* out) {
      float v = x[blockIdx.x * 32 + threadIdx.x];
      for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
      out[blockIdx.x * 32 + threadIdx.x] = v;
    }"""
    x = np.arange(96, dtype=np.float32) * 0.5
    out = np.zeros_like(x)
    RawKernel(code, "warp_sum")((3,), (32,), (x, out))
    np.testing.assert_array_equal(out, np.repeat(x.reshape(3, 32).sum(axis=1), 32))


VOTE_CODE = r"""
extern "C" __global__ void votes(const int* pred, unsigned* ballot, int* any_all) {
  int t = blockIdx.x * blockDim.x + threadIdx.x, warp = t / 32;
  int p = pred[t];
  unsigned b = __ballot_sync(0xffffffffu, p);
  int any = __any_sync(0xffffffffu, p);
  int all = __all_sync(0xffffffffu, p);
  if (threadIdx.x % 32 == 0) {
    ballot[warp] = b;
    any_all[2 * warp] = any;
    any_all[2 * warp + 1] = all;
  }
}
"""


def test_ballot_any_all():
    rng = np.random.default_rng(3)
    pred = np.zeros((6, 32), dtype=np.int32)
    pred[0] = 1
    pred[2] = rng.integers(0, 2, 32)
    pred[3, 17] = 1
    pred[4] = rng.integers(-3, 4, 32)  # any non-zero int counts as true
    pred[5] = 7
    pred[5, 31] = 0
    ballot = np.zeros(6, dtype=np.uint32)
    any_all = np.full(12, -1, dtype=np.int32)
    RawKernel(VOTE_CODE, "votes")((3,), (64,), (pred, ballot, any_all))
    bits = (pred != 0).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    np.testing.assert_array_equal(ballot, bits.sum(axis=1).astype(np.uint32))
    any_all = any_all.reshape(6, 2)
    np.testing.assert_array_equal(any_all[:, 0], (pred != 0).any(axis=1))
    np.testing.assert_array_equal(any_all[:, 1], (pred != 0).all(axis=1))


def test_activemask_in_divergent_code_and_partial_warp():
    code = r"""
    extern "C" __global__ void active(unsigned* out) {
      int lane = threadIdx.x % 32;
      unsigned full = __activemask();
      unsigned low = __ballot_sync(full, lane < 5);
      unsigned branch = 0;
      if (lane % 3 == 0) branch = __activemask();
      out[3 * threadIdx.x] = full;
      out[3 * threadIdx.x + 1] = low;
      out[3 * threadIdx.x + 2] = branch;
    }"""
    threads = 40  # the second warp has 8 lanes
    out = np.zeros(3 * threads, dtype=np.uint32)
    RawKernel(code, "active")((1,), (threads,), (out,))
    lane = np.arange(threads) % 32
    warp = np.arange(threads) // 32
    lanes_of_warp = [np.arange(32), np.arange(8)]
    full = np.array([sum(1 << int(x) for x in lanes) for lanes in lanes_of_warp])
    branch = np.array([sum(1 << int(x) for x in lanes if x % 3 == 0) for lanes in lanes_of_warp])
    expected = np.stack([full[warp], np.full(threads, 0b11111),
                         np.where(lane % 3 == 0, branch[warp], 0)], axis=1).astype(np.uint32)
    np.testing.assert_array_equal(out.reshape(threads, 3), expected)


def test_full_warp_collective_after_a_divergent_one():
    code = r"""
    extern "C" __global__ void reconverge(const int* x, int* out) {
      int lane = threadIdx.x, v = x[lane];
      if (lane % 4 == 0) v += __shfl_down_sync(0x11111111u, v, 4);
      out[lane] = __shfl_sync(0xffffffffu, v, 0);
    }"""
    x = np.arange(32, dtype=np.int32) * 3 + 1
    out = np.zeros(32, dtype=np.int32)
    RawKernel(code, "reconverge")((1,), (32,), (x, out))
    np.testing.assert_array_equal(out, np.full(32, x[0] + x[4]))


REDUCE_CODE = r"""
extern "C" __global__ void reductions(const int* x, int* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32, warp = t / 32;
  int v = x[t];
  unsigned u = (unsigned)v;
  int add = __reduce_add_sync(0xffffffffu, v);
  int mn = __reduce_min_sync(0xffffffffu, v);
  int mx = __reduce_max_sync(0xffffffffu, v);
  unsigned umn = __reduce_min_sync(0xffffffffu, u);
  unsigned umx = __reduce_max_sync(0xffffffffu, u);
  unsigned a = __reduce_and_sync(0xffffffffu, u);
  unsigned o = __reduce_or_sync(0xffffffffu, u);
  unsigned xr = __reduce_xor_sync(0xffffffffu, u);
  int half = 0;
  if (lane < 16) half = __reduce_add_sync(0x0000ffffu, v);
  if (lane == 0) {
    int* r = out + 9 * warp;
    r[0] = add; r[1] = mn; r[2] = mx; r[3] = (int)umn; r[4] = (int)umx;
    r[5] = (int)a; r[6] = (int)o; r[7] = (int)xr; r[8] = half;
  }
}
"""


def test_warp_reduce_intrinsics():
    rng = np.random.default_rng(4)
    x = rng.integers(-2**20, 2**20, size=(4, 32), dtype=np.int32)
    x[1] |= 0x0F00  # give the AND reduction a non-zero result
    x[2] = np.abs(x[2])
    out = np.zeros(4 * 9, dtype=np.int32)
    RawKernel(REDUCE_CODE, "reductions")((2,), (64,), (x, out))
    u = x.view(np.uint32)
    expected = np.stack([
        x.sum(axis=1), x.min(axis=1), x.max(axis=1),
        u.min(axis=1).view(np.int32), u.max(axis=1).view(np.int32),
        np.bitwise_and.reduce(u, axis=1).view(np.int32),
        np.bitwise_or.reduce(u, axis=1).view(np.int32),
        np.bitwise_xor.reduce(u, axis=1).view(np.int32),
        x[:, :16].sum(axis=1)], axis=1)
    np.testing.assert_array_equal(out.reshape(4, 9), expected)


def test_match_any_and_match_all():
    code = r"""
    extern "C" __global__ void match(const int* x, unsigned* out) {
      int pred;
      unsigned same = __match_any_sync(0xffffffffu, x[threadIdx.x]);
      unsigned all = __match_all_sync(0xffffffffu, x[threadIdx.x] / 100, &pred);
      out[3 * threadIdx.x] = same;
      out[3 * threadIdx.x + 1] = all;
      out[3 * threadIdx.x + 2] = pred;
    }"""
    x = (np.arange(32, dtype=np.int32) * 7) % 5
    out = np.zeros(96, dtype=np.uint32)
    RawKernel(code, "match")((1,), (32,), (x, out))
    weights = np.uint64(1) << np.arange(32, dtype=np.uint64)
    same = [(weights * (x == x[i])).sum() for i in range(32)]
    expected = np.stack([same, np.full(32, 0xFFFFFFFF), np.ones(32)], axis=1)
    np.testing.assert_array_equal(out.reshape(32, 3), expected.astype(np.uint32))


def test_shuffle_from_a_lane_outside_the_mask_is_reported():
    code = r"""
    extern "C" __global__ void bad(int* out) {
      int lane = threadIdx.x;
      if (lane < 16) out[lane] = __shfl_sync(0x0000ffffu, lane, lane + 16);
    }"""
    run = RawKernel(code, "bad").launch((1,), (32,), (np.zeros(32, np.int32),))
    assert run.compiled and not run.ok
    assert run.findings[0].kind == "invalid" and run.findings[0].thread == (0, 0, 0)
    assert "reads lane 16, outside the member mask" in run.findings[0].message


CG_CODE = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;

extern "C" __global__ void groups(const int* x, int* block_sums, int* info) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  cg::thread_block_tile<8> eight = cg::tiled_partition<8>(block);
  __shared__ int warp_sums[32];
  int rank = block.thread_rank();
  int v = x[blockIdx.x * block.size() + rank];
  int s = v;
  for (int offset = 16; offset > 0; offset /= 2) s += warp.shfl_down(s, offset);
  if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = s;
  block.sync();
  if (rank == 0) {
    int total = 0;
    for (unsigned w = 0; w < warp.meta_group_size(); ++w) total += warp_sums[w];
    block_sums[blockIdx.x] = total;
  }
  int* r = info + 7 * (blockIdx.x * block.size() + rank);
  r[0] = rank;
  r[1] = warp.thread_rank();
  r[2] = warp.meta_group_rank();
  r[3] = cg::reduce(eight, v, cg::plus<int>());
  r[4] = cg::reduce(warp, v, cg::greater<int>());
  r[5] = cg::inclusive_scan(eight, v);
  r[6] = cg::exclusive_scan(warp, v);
}
"""


def test_cooperative_groups_block_and_tiles():
    blocks, block = 2, (16, 8)
    size = block[0] * block[1]
    rng = np.random.default_rng(5)
    x = rng.integers(-100, 100, size=blocks * size, dtype=np.int32)
    sums = np.zeros(blocks, dtype=np.int32)
    info = np.zeros(7 * blocks * size, dtype=np.int32)
    RawKernel(CG_CODE, "groups")((blocks,), block, (x, sums, info))
    np.testing.assert_array_equal(sums, x.reshape(blocks, size).sum(axis=1))
    rank = np.tile(np.arange(size), blocks)
    tiles8 = x.reshape(-1, 8)
    warps = x.reshape(-1, 32)
    scan_warps = np.cumsum(warps, axis=1) - warps
    expected = np.stack([rank, rank % 32, rank // 32,
                         np.repeat(tiles8.sum(axis=1), 8), np.repeat(warps.max(axis=1), 32),
                         np.cumsum(tiles8, axis=1).ravel(), scan_warps.ravel()], axis=1)
    np.testing.assert_array_equal(info.reshape(-1, 7), expected)


def test_shuffles_of_half_and_bfloat16_values():
    code = r"""
    #include <cuda_fp16.h>
    #include <cuda_bf16.h>
    extern "C" __global__ void rotate(const __half2* h, const __nv_bfloat16* b, __half2* ho,
                                      __nv_bfloat16* bo) {
      int lane = threadIdx.x;
      ho[lane] = __shfl_sync(0xffffffffu, h[lane], (lane + 5) % 32);
      bo[lane] = __shfl_xor_sync(0xffffffffu, b[lane], 3);
    }"""
    h = (np.arange(64) * 0.5 - 7).astype(np.float16)
    b = np.arange(32, dtype=np.uint16) + 0x3F80  # bfloat16 bit patterns from 1.0 upwards
    ho = np.zeros_like(h)
    bo = np.zeros_like(b)
    RawKernel(code, "rotate")((1,), (32,), (h, b, ho, bo))
    lane = np.arange(32)
    np.testing.assert_array_equal(ho.reshape(32, 2), h.reshape(32, 2)[(lane + 5) % 32])
    np.testing.assert_array_equal(bo, b[lane ^ 3])


def test_activemask_alone_in_a_kernel_sees_the_partial_last_warp():
    code = r"""extern "C" __global__ void k(unsigned* y) { y[threadIdx.x] = __activemask(); }"""
    y = np.zeros(40, np.uint32)
    run = RawKernel(code, "k").launch((1,), (40,), (y,))
    assert run.ok, run.findings
    np.testing.assert_array_equal(y, [0xFFFFFFFF] * 32 + [0xFF] * 8)
