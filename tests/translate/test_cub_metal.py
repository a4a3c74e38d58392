"""CUB in Metal (agent/translate/cub.py, kb/rules/metal/kport_cub.metal): each CUB collective a
kernel uses is mapped onto kport's MSL library, and the port run in metal_sim gives what the CUDA
kernel gives in cuda_sim (whose CUB matches real CUB: docs/fidelity.md). Inputs are small
integers where the order of additions could differ; CUB constructs the library lacks stay
counted TODOs naming them."""

import textwrap

import numpy as np
import pytest

from agent.translate import translate_kernel
from tests.translate.test_translate import run_both

HEAD = "#include <cub/cub.cuh>\n"


def _ints(n, seed=0, lo=-8, hi=9):
    return np.random.default_rng(seed).integers(lo, hi, n).astype(np.float32)


def _check(src, kernel, inputs, outs, grid, block, shared_mem=0):
    tr, want, got = run_both(HEAD + textwrap.dedent(src), kernel, inputs, outs, grid, block,
                             shared_mem=shared_mem)
    assert not [t for t in tr.todos if t.construct.startswith("cub")], tr.todos
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    return tr


REDUCE = """
template <int BLOCK, int IPT>
__global__ void k(const float* x, float* y, int valid) {
  typedef cub::BlockReduce<float, BLOCK> BlockReduce;
  __shared__ typename BlockReduce::TempStorage temp;
  int t = threadIdx.x, b = blockIdx.x;
  float v = x[b * BLOCK + t];
  float items[IPT];
  for (int i = 0; i < IPT; ++i) items[i] = x[(b * BLOCK + t) * IPT % (BLOCK * 2) + i];
  float s = BlockReduce(temp).Sum(v);
  __syncthreads();
  float m = BlockReduce(temp).Reduce(v, cub::Max());
  __syncthreads();
  float p = BlockReduce(temp).Sum(v, valid);
  __syncthreads();
  float q = BlockReduce(temp).Reduce(items, cub::Min());
  __syncthreads();
  float r = BlockReduce(temp).Sum(items);
  if (t == 0) {
    y[b * 5] = s; y[b * 5 + 1] = m; y[b * 5 + 2] = p; y[b * 5 + 3] = q; y[b * 5 + 4] = r;
  }
}
"""


@pytest.mark.parametrize("block, valid", [
    (96, 50), pytest.param(128, 128, marks=pytest.mark.slow),
    pytest.param(32, 7, marks=pytest.mark.slow)])
def test_block_reduce_sum_max_min_partial_tiles_and_items(block, valid):
    tr = _check(REDUCE, f"k<{block}, 3>", {"x": _ints(2 * block * 3), "valid": np.int32(valid)},
                {"y": np.zeros(10, np.float32)}, ["2"], [block])
    assert tr.mapped["cub::BlockReduce"] and "cub.block_reduce" in tr.rules_used
    assert "namespace kport_cub" in tr.header and "kport_cub::BlockReduce<float" in tr.body
    assert "BlockReduce(temp, thread_index_in_threadgroup).Sum(v)" in tr.body


SCAN = """
struct RunningMax {  // a prefix callback: the running maximum over the tiles so far
  float running;
  __device__ RunningMax(float r) : running(r) {}
  __device__ float operator()(float block_aggregate) {
    float old = running;
    running = block_aggregate > running ? block_aggregate : running;
    return old;
  }
};
struct Plus { __device__ float operator()(const float& a, const float& b) const { return a + b; } };

template <int BLOCK>
__global__ void k(const float* x, float* y, int n) {
  using BlockScanT = cub::BlockScan<float, BLOCK, cub::BLOCK_SCAN_WARP_SCANS>;
  __shared__ typename BlockScanT::TempStorage temp;
  int t = threadIdx.x;
  float v = x[t], a, b, c, agg, items[2], outs[2];
  BlockScanT(temp).InclusiveSum(v, a);
  __syncthreads();
  BlockScanT(temp).ExclusiveScan(v, b, -100.0f, cub::Max());
  __syncthreads();
  BlockScanT(temp).ExclusiveSum(v, c, agg);
  __syncthreads();
  y[t] = a; y[BLOCK + t] = b; y[2 * BLOCK + t] = c + agg;
  items[0] = v; items[1] = x[BLOCK + t];
  BlockScanT(temp).InclusiveScan(items, outs, Plus());
  y[3 * BLOCK + 2 * t] = outs[0]; y[3 * BLOCK + 2 * t + 1] = outs[1];
  RunningMax prefix(-1000.0f);
  for (int tile = 0; tile < 3; ++tile) {  // a chunked scan: the callback carries the prefix
    __syncthreads();
    float w = x[tile * BLOCK + t], o;
    BlockScanT(temp).InclusiveScan(w, o, cub::Max(), prefix);
    y[5 * BLOCK + tile * BLOCK + t] = o;
  }
}
"""


@pytest.mark.parametrize("block", [64, pytest.param(32, marks=pytest.mark.slow)])
def test_block_scan_sums_custom_operators_items_and_a_prefix_callback(block):
    _check(SCAN, f"k<{block}>", {"x": _ints(3 * block, 1), "n": np.int32(0)},
           {"y": np.zeros(8 * block, np.float32)}, ["1"], [block])


LOAD_STORE = """
template <int BLOCK, int IPT, cub::BlockLoadAlgorithm LA, cub::BlockStoreAlgorithm SA>
__global__ void k(const float* x, float* y, int valid) {
  using Load = cub::BlockLoad<float, BLOCK, IPT, LA>;
  using Store = cub::BlockStore<float, BLOCK, IPT, SA>;
  extern __shared__ char smem_[];
  auto& load_storage = reinterpret_cast<typename Load::TempStorage&>(smem_);
  auto& store_storage = reinterpret_cast<typename Store::TempStorage&>(smem_);
  float items[IPT];
  for (int i = 0; i < IPT; ++i) items[i] = -7.0f;
  int tile = blockIdx.x * BLOCK * IPT;
  Load(load_storage).Load(x + tile, items, valid);
  for (int i = 0; i < IPT; ++i) y[BLOCK * IPT * gridDim.x + tile + threadIdx.x * IPT + i] =
      items[i];
  for (int i = 0; i < IPT; ++i) y[tile + threadIdx.x * IPT + i] = 0.0f;  // beyond valid: 0
  __syncthreads();
  Store(store_storage).Store(y + tile, items, valid);
}
"""
ALGORITHMS = ["DIRECT", "WARP_TRANSPOSE"] + [pytest.param(a, marks=pytest.mark.slow)
                                            for a in ("STRIPED", "VECTORIZE", "TRANSPOSE")]


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_block_load_store_algorithms_through_dynamic_shared_memory(alg):
    block, ipt = 64, 4
    tile = block * ipt
    tr = _check(LOAD_STORE, f"k<{block}, {ipt}, cub::BLOCK_LOAD_{alg}, cub::BLOCK_STORE_{alg}>",
                {"x": np.arange(2 * tile, dtype=np.float32), "valid": np.int32(tile - 37)},
                {"y": np.zeros(4 * tile, np.float32)}, ["2"], [block], shared_mem=4 * tile)
    assert "reinterpret_cast<threadgroup typename Load::TempStorage&>(smem_)" in tr.body


WARP = """
__global__ void k(const float* x, float* y, int n) {
  typedef cub::WarpReduce<float, 16> WarpReduce16;
  typedef cub::WarpScan<float> WarpScan32;
  __shared__ typename WarpReduce16::TempStorage reduce_storage[4];
  __shared__ typename WarpScan32::TempStorage scan_storage[2];
  int t = threadIdx.x;
  float v = x[t], incl, excl, agg;
  float s = WarpReduce16(reduce_storage[t / 16]).Sum(v);
  float p = WarpReduce16(reduce_storage[t / 16]).Reduce(v, cub::Max(), 5);
  WarpScan32(scan_storage[t / 32]).InclusiveSum(v, incl, agg);
  WarpScan32(scan_storage[t / 32]).ExclusiveScan(v, excl, 0.5f, cub::Sum());
  y[t] = (t % 16 == 0) ? s + 100.0f * p : 0.0f;
  y[64 + t] = incl + agg;
  y[128 + t] = excl;
}
"""


def test_warp_reduce_and_warp_scan_on_logical_warps():
    _check(WARP, "k", {"x": _ints(64, 2), "n": np.int32(0)}, {"y": np.zeros(192, np.float32)},
           ["1"], [64])


HELPER = """
template <int BLOCK>
struct Traits {
  using BlockLoadT = cub::BlockLoad<float, BLOCK, 2, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using BlockReduceT = cub::BlockReduce<float, BLOCK>;
};
template <typename K>
__device__ float load_and_sum(const float* x, typename K::BlockLoadT::TempStorage& ls,
                              typename K::BlockReduceT::TempStorage& rs) {
  float items[2];
  typename K::BlockLoadT(ls).Load(x, items);
  return typename K::BlockReduceT(rs).Sum(items[0] * items[1]);
}
__global__ void k(const float* x, float* y, int n) {
  using K = Traits<64>;
  __shared__ typename K::BlockLoadT::TempStorage ls;
  __shared__ typename K::BlockReduceT::TempStorage rs;
  float s = load_and_sum<K>(x + blockIdx.x * 128, ls, rs);
  if (threadIdx.x == 0) y[blockIdx.x] = s;
}
"""


def test_a_helper_making_collectives_gets_the_thread_index():
    tr = _check(HELPER, "k", {"x": _ints(256, 3), "n": np.int32(0)},
                {"y": np.zeros(2, np.float32)}, ["2"], [64])
    assert "uint thread_index_in_threadgroup" in tr.header


def test_cub_constructs_without_a_metal_form_stay_counted_todos():
    tr = translate_kernel(HEAD + textwrap.dedent("""
        __global__ void k(const int* x, int* y, int n) {
          typedef cub::BlockRadixSort<int, 64, 2> Sort;
          typedef cub::BlockReduce<int, 64> Reduce;
          int v = Reduce().Sum(x[threadIdx.x]);
          y[threadIdx.x] = v + cub::ThreadLoad<cub::LOAD_LDG>(x);
        }"""), "k")
    todos = [(t.rule, t.construct) for t in tr.todos]
    assert ("types.unknown_name", "cub::BlockRadixSort") in todos
    assert ("types.unknown_name", "cub::ThreadLoad") in todos
    assert ("cub.block_reduce", "Reduce() without TempStorage") in todos
    assert tr.mapped["cub::BlockReduce"] == 1
