"""cuda_sim's CUB (runners/simcore/include/kport/cuda/sysinclude/cub/): block and warp collectives
against numpy on CUB's documented examples, every algorithm, partial tiles, blocks that are not
powers of two, a Mamba-style chunked scan; TempStorage sizes and outputs against real CUB on an
NVIDIA H200 (tests/sim/cub_fidelity/); what CUB leaves undefined comes back poisoned."""

import hashlib
from pathlib import Path

import numpy as np
import pytest

from runners.cuda_sim import RawKernel
from runners.srcrewrite import SourceError
from tests.sim.cub_fidelity import cases as fidelity

FIDELITY = Path(__file__).parent / "cub_fidelity"
KERNELS = (FIDELITY / "kernels.cuh").read_text()
LOAD_ALGS = fidelity.LOAD_ALGS


def _h200_sizes() -> dict[str, tuple[int, int]]:
    table = {}
    for line in (FIDELITY / "h200_sizes.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            label, size, align = line.split("\t")
            table[label] = (int(size), int(align))
    return table


def _line_of(code: str, text: str) -> int:
    return next(i for i, line in enumerate(code.split("\n"), 1) if text in line)


# ---- BlockLoad / BlockStore / BlockExchange ---------------------------------------------------
def _run_load_store(alg: str, bx: int, ipt: int, valid: int, default: int, by: int = 1):
    tile = bx * by * ipt
    x = np.arange(2 * tile, dtype=np.float32) + 0.5
    out = np.zeros(4 * tile, np.float32)
    kernel = (f"load_store_k<float, {bx}, {ipt}, cub::BLOCK_LOAD_{alg}, "
              f"cub::BLOCK_STORE_{alg}, {by}>")
    RawKernel(KERNELS, kernel)((2,), (bx, by), (x, out, np.int32(valid), np.int32(default)))
    return x, out[:2 * tile].reshape(2, bx * by, ipt), out[2 * tile:].reshape(2, tile)


@pytest.mark.parametrize("alg", LOAD_ALGS)
@pytest.mark.parametrize("bx, ipt, by", [(128, 4, 1), (64, 8, 1), (96, 3, 1), (16, 4, 4)])
def test_block_load_arrangements_and_store(alg, bx, ipt, by):
    threads, tile = bx * by, bx * by * ipt
    x, dump, stored = _run_load_store(alg, bx, ipt, -1, 0, by)
    t, i = np.arange(threads)[:, None], np.arange(ipt)[None, :]
    # blocked: thread t holds items t*IPT .. t*IPT + IPT-1; striped: t, t + threads, ...
    index = i * threads + t if alg == "STRIPED" else t * ipt + i
    for b in range(2):
        np.testing.assert_array_equal(dump[b], x[b * tile + index])
        np.testing.assert_array_equal(stored[b], x[b * tile:(b + 1) * tile])


@pytest.mark.parametrize("alg", LOAD_ALGS)
@pytest.mark.parametrize("default", [0, 1])
def test_partial_tiles_load_defaults_and_store_only_valid_items(alg, default):
    bx, ipt, tile, valid = 64, 4, 256, 171
    x, dump, stored = _run_load_store(alg, bx, ipt, valid, default)
    t, i = np.arange(bx)[:, None], np.arange(ipt)[None, :]
    index = i * bx + t if alg == "STRIPED" else t * ipt + i
    for b in range(2):
        got, want = dump[b], x[b * tile + np.minimum(index, tile - 1)]
        inside = index < valid
        np.testing.assert_array_equal(got[inside], want[inside])
        # beyond valid_items: oob_default, else what the thread's array held (-7 here), which
        # the transposing algorithms move along with the loaded items, as CUB does
        np.testing.assert_array_equal(got[~inside], -3.0 if default else -7.0)
        np.testing.assert_array_equal(stored[b, :valid], x[b * tile:b * tile + valid])
        np.testing.assert_array_equal(stored[b, valid:], 0.0)


DOC_EXAMPLE = r"""
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>
#include <cub/block/block_exchange.cuh>
// CUB's BlockLoad / BlockStore example: 512 ints, 128 threads, 4 per thread, warp-transposed;
// the temp storage in a union, as the documentation declares it.
__global__ void example(int* d_data, int* blocked, int* striped) {
  using BlockLoad = cub::BlockLoad<int, 128, 4, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using BlockStore = cub::BlockStore<int, 128, 4, cub::BLOCK_STORE_WARP_TRANSPOSE>;
  using BlockExchange = cub::BlockExchange<int, 128, 4>;
  __shared__ union {
    typename BlockLoad::TempStorage load;
    typename BlockStore::TempStorage store;
    typename BlockExchange::TempStorage exchange;
  } temp_storage;
  int thread_data[4];
  BlockLoad(temp_storage.load).Load(d_data, thread_data);
  for (int i = 0; i < 4; i++) blocked[threadIdx.x * 4 + i] = thread_data[i];
  __syncthreads();
  BlockExchange(temp_storage.exchange).BlockedToStriped(thread_data, thread_data);
  for (int i = 0; i < 4; i++) striped[threadIdx.x * 4 + i] = thread_data[i];
  __syncthreads();
  BlockExchange(temp_storage.exchange).StripedToBlocked(thread_data);
  __syncthreads();
  for (int i = 0; i < 4; i++) thread_data[i] *= 10;
  BlockStore(temp_storage.store).Store(d_data, thread_data);
}
"""


def test_documented_load_exchange_store_example():
    data = np.arange(512, dtype=np.int32)
    blocked, striped = np.zeros(512, np.int32), np.zeros(512, np.int32)
    RawKernel(DOC_EXAMPLE, "example")((1,), (128,), (data, blocked, striped))
    # { [0,1,2,3], [4,5,6,7], ..., [508,509,510,511] } and striped { [0,128,256,384], ... }
    np.testing.assert_array_equal(blocked, np.arange(512))
    np.testing.assert_array_equal(striped.reshape(128, 4), np.arange(512).reshape(4, 128).T)
    np.testing.assert_array_equal(data, np.arange(512) * 10)


SCATTER = r"""
#include <cub/block/block_exchange.cuh>
template <bool SLICED>
__global__ void scatter(const int* ranks, int* out) {
  using BE = cub::BlockExchange<int, 64, 2, SLICED>;
  __shared__ typename BE::TempStorage ts;
  int t = threadIdx.x, items[2] = {10 * t, 10 * t + 1}, r[2] = {ranks[2 * t], ranks[2 * t + 1]};
  BE(ts).ScatterToStriped(items, items, r);
  out[t] = items[0];
  out[64 + t] = items[1];
}
"""


@pytest.mark.parametrize("sliced", ["false", "true"])
def test_block_exchange_scatter_to_striped(sliced):
    ranks = np.random.default_rng(3).permutation(128).astype(np.int32)
    out = np.zeros(128, np.int32)
    RawKernel(SCATTER, f"scatter<{sliced}>")((1,), (64,), (ranks, out))
    tile = np.zeros(128, np.int64)
    tile[ranks] = (10 * (np.arange(128) // 2) + np.arange(128) % 2)
    np.testing.assert_array_equal(out, tile)  # striped: item i of thread t is tile[i*64 + t]


def test_warp_transpose_needs_whole_warps():
    code = DOC_EXAMPLE.replace("cub::BlockLoad<int, 128, 4", "cub::BlockLoad<int, 48, 4")
    run = RawKernel(code, "example").launch((1,), (48,), tuple(np.zeros(512, np.int32)
                                                               for _ in range(3)))
    assert not run.compiled
    assert any("need a block of whole warps" in d.message for d in run.diagnostics)


# ---- BlockReduce -------------------------------------------------------------------------------
REDUCE = r"""
#include <cub/block/block_reduce.cuh>
template <int BT, cub::BlockReduceAlgorithm ALG>
__global__ void reduce(const int* x, int* out, float* poisoned, int num_valid) {
  using BR = cub::BlockReduce<int, BT, ALG>;
  __shared__ typename BR::TempStorage ts;
  int t = threadIdx.x, v = x[blockIdx.x * BT + t];
  int items[3] = {v, 2 * v, -v};
  int r = num_valid < 0 ? BR(ts).Sum(v) : BR(ts).Reduce(v, cub::Max(), num_valid);
  if (t == 0) out[blockIdx.x * 2] = r;
  __syncthreads();
  r = BR(ts).Sum(items);
  if (t == 0) out[blockIdx.x * 2 + 1] = r;
  __syncthreads();
  float f = cub::BlockReduce<float, BT, ALG>().Sum(1.0f);
  poisoned[blockIdx.x * BT + t] = f;
}
"""
REDUCE_ALGS = ["BLOCK_REDUCE_WARP_REDUCTIONS", "BLOCK_REDUCE_RAKING",
               "BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY"]


@pytest.mark.parametrize("alg", REDUCE_ALGS)
@pytest.mark.parametrize("threads", [128, 96, 80, 7, 1024])
@pytest.mark.parametrize("partial", [False, True])
def test_block_reduce_in_thread_zero_only(alg, threads, partial):
    x = np.random.default_rng(threads).integers(-1000, 1000, 2 * threads, dtype=np.int32)
    out, poisoned = np.zeros(4, np.int32), np.zeros(2 * threads, np.float32)
    num_valid = threads * 2 // 3 + 1 if partial else -1
    RawKernel(REDUCE, f"reduce<{threads}, cub::{alg}>")(
        (2,), (threads,), (x, out, poisoned, np.int32(num_valid)))
    blocks = x.reshape(2, threads)
    first = blocks[:, :num_valid].max(axis=1) if partial else blocks.sum(axis=1)
    np.testing.assert_array_equal(out.reshape(2, 2), np.stack([first, 2 * blocks.sum(1)], 1))
    per_block = poisoned.reshape(2, threads)
    np.testing.assert_array_equal(per_block[:, 0], threads)
    assert np.isnan(per_block[:, 1:]).all()  # defined in thread 0 only: poison elsewhere


def test_block_reduce_for_a_smaller_block_with_num_valid():
    # vLLM's norm kernels: BlockReduce<float, 1024> in blocks of min(hidden, 1024) threads.
    x = np.random.default_rng(5).standard_normal(3 * 96).astype(np.float32)
    out = np.zeros(3, np.float32)
    RawKernel(KERNELS, "reduce_launch_k<1024, cub::BLOCK_REDUCE_WARP_REDUCTIONS>")(
        (3,), (96,), (x, out, np.int32(0), np.int32(0)))
    np.testing.assert_allclose(out, x.reshape(3, 96).sum(axis=1), rtol=1e-5)


def test_block_smaller_than_the_collective_is_reported():
    x, out = np.ones(192, np.int32), np.zeros(4, np.int32)
    run = RawKernel(REDUCE, "reduce<128, cub::BLOCK_REDUCE_WARP_REDUCTIONS>").launch(
        (1,), (96,), (x, out, np.zeros(192, np.float32), np.int32(-1)))
    line = _line_of(REDUCE, "int r = ")
    assert any(f.kind == "invalid" and f.line == line and "sized for 128 threads but the block "
               "has 96" in f.message for f in run.findings)


# ---- BlockScan ---------------------------------------------------------------------------------
SCAN = r"""
#include <cub/block/block_scan.cuh>
#include <limits.h>
// CUB's examples: a running total across tiles (BlockScanRunningPrefixOp's pattern).
struct RunningTotal {
  int total;
  __device__ RunningTotal(int start) : total(start) {}
  __device__ int operator()(int block_aggregate) {
    int old = total;
    total += block_aggregate;
    return old;
  }
};
template <int BT, cub::BlockScanAlgorithm ALG>
__global__ void examples(const int* x, int* out, int* aggregates) {
  using BS = cub::BlockScan<int, BT, ALG>;
  __shared__ typename BS::TempStorage ts;
  int t = threadIdx.x, y, agg;
  BS(ts).ExclusiveSum(1, y, agg);                       // 1s: 0, 1, 2, ...
  out[t] = y;
  aggregates[t] = agg;
  __syncthreads();
  int items[4] = {1, 1, 1, 1};
  BS(ts).InclusiveSum(items, items);                    // {[1,2,3,4], [5,6,7,8], ...}
  for (int i = 0; i < 4; i++) out[BT + 4 * t + i] = items[i];
  __syncthreads();
  BS(ts).ExclusiveScan(x[t], y, INT_MIN, cub::Max());   // running maximum
  out[5 * BT + t] = y;
  RunningTotal prefix(0);
  for (int tile = 0; tile < 3; tile++) {                // tiles of 1s: 0 .. 3*BT-1
    __syncthreads();
    BS(ts).ExclusiveSum(1, y, prefix);
    out[6 * BT + tile * BT + t] = y;
  }
  if (t == 0) aggregates[BT] = prefix.total;
}
"""
SCAN_ALGS = ["BLOCK_SCAN_RAKING", "BLOCK_SCAN_RAKING_MEMOIZE", "BLOCK_SCAN_WARP_SCANS"]


@pytest.mark.parametrize("alg", SCAN_ALGS)
@pytest.mark.parametrize("threads", [128, 80, 7, 1024])
def test_block_scan_documented_examples(alg, threads):
    x = np.array([(-1) ** i * i for i in range(threads)], np.int32)  # 0, -1, 2, -3, 4, ...
    out, aggregates = np.zeros(9 * threads, np.int32), np.zeros(threads + 1, np.int32)
    RawKernel(SCAN, f"examples<{threads}, cub::{alg}>")((1,), (threads,), (x, out, aggregates))
    np.testing.assert_array_equal(out[:threads], np.arange(threads))
    np.testing.assert_array_equal(aggregates, [threads] * threads + [3 * threads])
    np.testing.assert_array_equal(out[threads:5 * threads], np.arange(1, 4 * threads + 1))
    running_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int32).min], x]))[:-1]
    np.testing.assert_array_equal(out[5 * threads:6 * threads], running_max)
    np.testing.assert_array_equal(out[6 * threads:], np.arange(3 * threads))


MAMBA = r"""
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>
#include <cub/block/block_scan.cuh>
// selective_scan_fwd_kernel's shape: dynamic shared memory sized on the host from sizeof of the
// TempStorage types, warp-transposed loads with a default past seqlen, a (decay, input) scan in
// chunks chained by a prefix callback whose state lane 0 of every warp reads back.
struct ScanOp {
  __device__ float2 operator()(const float2& a, const float2& b) const {
    return make_float2(b.x * a.x, b.x * a.y + b.y);
  }
};
struct PrefixOp {
  float2 running;
  __device__ PrefixOp(float2 r) : running(r) {}
  __device__ float2 operator()(float2 block_aggregate) {
    float2 old = running;
    running = ScanOp()(running, block_aggregate);
    return old;
  }
};
template <int N, int ITEMS>
__global__ void selective_scan(const float* decay, const float* u, float* h, float* last,
                               int seqlen) {
  using Load = cub::BlockLoad<float, N, ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Store = cub::BlockStore<float, N, ITEMS, cub::BLOCK_STORE_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<float2, N, cub::BLOCK_SCAN_WARP_SCANS>;
  constexpr int IO = sizeof(typename Load::TempStorage) > sizeof(typename Store::TempStorage)
                         ? sizeof(typename Load::TempStorage) : sizeof(typename Store::TempStorage);
  extern __shared__ char smem[];
  auto& load_ts = reinterpret_cast<typename Load::TempStorage&>(smem);
  auto& store_ts = reinterpret_cast<typename Store::TempStorage&>(smem);
  auto& scan_ts = *reinterpret_cast<typename Scan::TempStorage*>(smem + IO);
  float2* running = reinterpret_cast<float2*>(smem + IO + sizeof(typename Scan::TempStorage));
  constexpr int CHUNK = N * ITEMS;
  for (int chunk = 0; chunk * CHUNK < seqlen; chunk++) {
    int left = seqlen - chunk * CHUNK;
    float a[ITEMS], b[ITEMS];
    Load(load_ts).Load(decay + chunk * CHUNK, a, left, 1.0f);
    __syncthreads();
    Load(load_ts).Load(u + chunk * CHUNK, b, left, 0.0f);
    __syncthreads();
    float2 data[ITEMS];
    for (int i = 0; i < ITEMS; i++) data[i] = make_float2(a[i], b[i]);
    float2 start = chunk > 0 && threadIdx.x % 32 == 0 ? *running : make_float2(1.f, 0.f);
    PrefixOp prefix(start);
    Scan(scan_ts).InclusiveScan(data, data, ScanOp(), prefix);
    if (threadIdx.x == 0) *running = prefix.running;
    float out[ITEMS];
    for (int i = 0; i < ITEMS; i++) out[i] = data[i].y;
    Store(store_ts).Store(h + chunk * CHUNK, out, left);
    __syncthreads();
  }
  if (threadIdx.x == 0) *last = running->y;
}
"""


@pytest.mark.parametrize("threads, items, seqlen", [(128, 4, 1300), (32, 8, 700), (64, 4, 256)])
def test_mamba_style_chunked_scan_with_prefix_callback(threads, items, seqlen):
    rng = np.random.default_rng(seqlen)
    decay = rng.uniform(0.5, 1.0, seqlen).astype(np.float32)
    u = rng.standard_normal(seqlen).astype(np.float32)
    h, last = np.zeros(seqlen, np.float32), np.zeros(1, np.float32)
    sizes = _h200_sizes()  # the host sizes shared memory with real CUB's sizeof
    io = max(sizes[f"BlockLoad<float, {threads}, {items}, cub::BLOCK_LOAD_WARP_TRANSPOSE>"][0],
             sizes[f"BlockStore<float, {threads}, {items}, cub::BLOCK_STORE_WARP_TRANSPOSE>"][0])
    scan = sizes[f"BlockScan<float2, {threads}, cub::BLOCK_SCAN_WARP_SCANS>"][0]
    RawKernel(MAMBA, f"selective_scan<{threads}, {items}>")(
        (1,), (threads,), (decay, u, h, last, np.int32(seqlen)), shared_mem=io + scan + 8)
    state, want = 0.0, np.zeros(seqlen)
    for i in range(seqlen):
        state = decay[i] * state + u[i]
        want[i] = state
    np.testing.assert_allclose(h, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(last[0], want[-1], rtol=1e-4, atol=1e-4)


def test_reusing_scan_storage_without_a_barrier_is_a_race():
    code = r"""
#include <cub/block/block_scan.cuh>
__global__ void twice(const int* x, int* out) {
  using Scan = cub::BlockScan<int, 64, cub::BLOCK_SCAN_WARP_SCANS>;
  __shared__ typename Scan::TempStorage ts;
  int a, b;
  Scan(ts).InclusiveSum(x[threadIdx.x], a);
  Scan(ts).ExclusiveSum(x[threadIdx.x], b);
  out[threadIdx.x] = a + b;
}"""
    run = RawKernel(code, "twice").launch((1,), (64,), (np.ones(64, np.int32),
                                                        np.zeros(64, np.int32)))
    assert any(f.kind == "race" and f.line == _line_of(code, "ExclusiveSum") for f in run.findings)


def test_large_items_travel_through_warp_collectives():
    code = r"""
#include <cub/block/block_scan.cuh>
struct Big { float v[20]; };  // 80 bytes: over one rendezvous slot
struct Add {
  __device__ Big operator()(const Big& a, const Big& b) const {
    Big r;
    for (int i = 0; i < 20; i++) r.v[i] = a.v[i] + b.v[i];
    return r;
  }
};
__global__ void big(const float* x, float* out) {
  using Scan = cub::BlockScan<Big, 64, cub::BLOCK_SCAN_WARP_SCANS>;
  __shared__ typename Scan::TempStorage ts;
  Big b, r;
  for (int i = 0; i < 20; i++) b.v[i] = x[threadIdx.x] * (i + 1);
  Scan(ts).InclusiveScan(b, r, Add());
  for (int i = 0; i < 20; i++) out[threadIdx.x * 20 + i] = r.v[i];
}"""
    x, out = np.arange(64, dtype=np.float32), np.zeros(64 * 20, np.float32)
    RawKernel(code, "big")((1,), (64,), (x, out))
    np.testing.assert_array_equal(out.reshape(64, 20), np.cumsum(x)[:, None] * np.arange(1, 21))


# ---- WarpReduce / WarpScan ---------------------------------------------------------------------
@pytest.mark.parametrize("lanes, block", [(32, 64), (16, 64), (8, 64), (4, 32), (7, 7), (24, 24)])
def test_warp_collectives_on_logical_warps(lanes, block):
    x = np.random.default_rng(lanes).integers(-50, 50, 2 * block).astype(np.float32)
    valid = lanes * 2 // 3 + 1
    segments = [x[b * block:(b + 1) * block][i:i + lanes] for b in range(2)
                for i in range(0, block, lanes)]

    def run(mode):
        out = np.zeros(4 * block, np.float32)
        RawKernel(KERNELS, f"warp_k<float, {lanes}>")(
            (2,), (block,), (x, out, np.int32(mode), np.int32(valid)))
        return out.reshape(2, 2, block)

    count = block // lanes
    sums = run(0)[:, 0, :count].ravel()
    np.testing.assert_array_equal(sums, [s.sum() for s in segments])
    np.testing.assert_array_equal(run(1)[:, 0, :count].ravel(), [s[:valid].sum() for s in segments])
    np.testing.assert_array_equal(run(2)[:, 0, :count].ravel(), [s.max() for s in segments])
    inclusive = np.concatenate([np.cumsum(s) for s in segments])
    exclusive = np.concatenate([np.cumsum(s) - s for s in segments])
    totals = np.concatenate([np.full(lanes, s.sum()) for s in segments])
    got = run(4)
    np.testing.assert_array_equal(got[:, 0].ravel(), inclusive)
    np.testing.assert_array_equal(got[:, 1].ravel(), totals)
    np.testing.assert_array_equal(run(5)[:, 0].ravel(), exclusive)
    np.testing.assert_array_equal(run(7)[:, 0].ravel(), exclusive + valid)
    np.testing.assert_array_equal(run(9)[:, 0].ravel(),
                                  np.concatenate([np.full(lanes, s[2 % lanes]) for s in segments]))


def test_warp_results_cub_leaves_undefined_are_poisoned():
    code = r"""
#include <cub/warp/warp_reduce.cuh>
#include <cub/warp/warp_scan.cuh>
__global__ void undefined(float* sums, float* exclusive) {
  __shared__ typename cub::WarpReduce<float, 8>::TempStorage rs[4];
  __shared__ typename cub::WarpScan<float>::TempStorage ss;
  int t = threadIdx.x;
  sums[t] = cub::WarpReduce<float, 8>(rs[t / 8]).Sum(1.0f);
  float y;
  cub::WarpScan<float>(ss).ExclusiveScan(1.0f, y, cub::Sum());
  exclusive[t] = y;
}"""
    sums, exclusive = np.zeros(32, np.float32), np.zeros(32, np.float32)
    RawKernel(code, "undefined")((1,), (32,), (sums, exclusive))
    first = np.arange(32) % 8 == 0
    np.testing.assert_array_equal(sums[first], 8.0)
    assert np.isnan(sums[~first]).all()  # a warp reduction is defined in lane 0 only
    assert np.isnan(exclusive[0])  # no initial value: lane 0's exclusive result is undefined
    np.testing.assert_array_equal(exclusive[1:], np.arange(1, 32))


# ---- Version macros ------------------------------------------------------------------------------
def test_cccl_version_is_the_release_of_the_cub_version_claimed():
    """CUB 2.7 ships in CCCL 2.7.0: code that tests CCCL_MAJOR/MINOR_VERSION (llama.cpp's
    argsort.cu asks for CCCL 3.1) sees the same release as code that tests CUB_VERSION."""
    code = """#include <cub/version.cuh>
#if (CCCL_MAJOR_VERSION >= 3 && CCCL_MINOR_VERSION >= 1)
#  define KP_STRIDED 1
#else
#  define KP_STRIDED 0
#endif
__global__ void versions(int* o) {
  o[0] = CUB_VERSION; o[1] = CCCL_VERSION; o[2] = CCCL_MAJOR_VERSION;
  o[3] = CCCL_MINOR_VERSION; o[4] = CCCL_PATCH_VERSION; o[5] = KP_STRIDED;
}"""
    out = np.zeros(6, np.int32)
    RawKernel(code, "versions")((1,), (1,), (out,))
    cub, cccl, major, minor, patch, strided = out.tolist()
    assert (cub // 100000, cub // 100 % 1000, cub % 100) == (major, minor, patch) == (2, 7, 0)
    assert cccl == major * 1000000 + minor * 1000 + patch and strided == 0


# ---- What is refused -----------------------------------------------------------------------------
@pytest.mark.parametrize("use, construct", [
    ("cub::DeviceScan::InclusiveSum(nullptr, bytes, x, x, 4)", "CUB device-wide algorithms"),
    ("cub::BlockRadixSort<int, 128, 4>* sort = nullptr", "CUB collectives cuda_sim does not"),
    ("thrust::sort(x, x + 4)", "Thrust algorithms"),
])
def test_unmodelled_cub_and_thrust_are_refused(use, construct):
    code = ("#include <cub/cub.cuh>\nvoid host(float* x) { size_t bytes = 0; " + use +
            "; }\n__global__ void k(float* o) { o[0] = 1; }\n")
    with pytest.raises(SourceError, match=construct):
        RawKernel(code, "k")((1,), (1,), (np.zeros(1, np.float32),))


# ---- Against real CUB on an NVIDIA H200 ----------------------------------------------------------
def test_temp_storage_sizes_match_real_cub():
    sizes = _h200_sizes()
    labels = [f"cub::{label}::TempStorage" for label in sizes]
    got = np.zeros(2 * len(labels), np.int64)
    RawKernel(fidelity.sizes_kernel(labels), "sizes")((1,), (1,), (got,))
    mismatched = [(label, tuple(got[2 * i:2 * i + 2]), want)
                  for i, (label, want) in enumerate(sizes.items())
                  if tuple(got[2 * i:2 * i + 2]) != want]
    assert len(sizes) > 1400 and not mismatched, mismatched[:5]


def _h200_digests() -> dict[str, str]:
    rows = (FIDELITY / "h200_outputs.tsv").read_text().splitlines()
    return dict(line.split("\t") for line in rows if line and not line.startswith("#"))


def _matches_h200(case: fidelity.Case, digests: dict[str, str]) -> bool:
    dtype, _ = fidelity.CTYPES[case.ctype]
    out = np.zeros(fidelity.out_shape(case), dtype)
    RawKernel(KERNELS, case.kernel)((case.grid,), case.block, (
        fidelity.inputs(case), out, np.int32(case.p0), np.int32(case.p1)))
    return hashlib.sha256(out.tobytes()).hexdigest()[:16] == digests[case.name]


# A few kernels of each kind for the quick tier: Mamba's scans, each reduce and scan algorithm
# on a non-power-of-two block, every load algorithm, warps of 16 and 7 lanes.
QUICK = ("ssm_k<128", "reduce_k<float, 80,", "reduce_k<float, 160,", "scan_k<float, 80,",
         "scan_k<float, 128, cub::BLOCK_SCAN_WARP_SCANS, 4>", "warp_k<float, 16>",
         "warp_k<float, 7>", "load_store_k<float, 96")


def _by_kernel() -> dict[str, list[fidelity.Case]]:
    found: dict[str, list[fidelity.Case]] = {}
    for cases in fidelity.all_cases().values():
        for case in cases:
            found.setdefault(case.kernel, []).append(case)
    return found


def test_every_output_real_cub_wrote_has_a_case():
    every = [c for cases in _by_kernel().values() for c in cases]
    assert len(every) == len(_h200_digests()) and len({c.name for c in every}) == len(every)


@pytest.mark.parametrize("kernel", [
    pytest.param(kernel, id=kernel, marks=() if kernel.startswith(QUICK) else pytest.mark.slow)
    for kernel in _by_kernel()])
def test_outputs_match_real_cub_bit_for_bit(kernel):
    digests = _h200_digests()
    differ = [c.name for c in _by_kernel()[kernel] if not _matches_h200(c, digests)]
    assert not differ, differ[:5]
