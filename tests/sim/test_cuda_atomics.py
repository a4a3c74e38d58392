"""cuda_sim atomics with many threads of many blocks contending: totals must be exact."""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel

BLOCKS, THREADS = 8, 128
N = BLOCKS * THREADS

INT_CODE = r"""
extern "C" __global__ void contend(const int* x, int* acc, unsigned* uacc, int* hist) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i];
  atomicAdd(&acc[0], v);
  atomicSub(&acc[1], v);
  atomicMin(&acc[2], v);
  atomicMax(&acc[3], v);
  atomicAnd(&acc[4], ~(1 << (i % 31)));
  atomicOr(&acc[5], 1 << (i % 31));
  atomicXor(&acc[6], v);
  atomicAdd(&acc[7], 1);
  atomicMin(&uacc[0], (unsigned)v);
  atomicMax(&uacc[1], (unsigned)v);
  atomicAdd(&uacc[2], 3u);
  atomicAdd(&hist[(v & 0x7fffffff) % 16], 1);
}
"""


def test_integer_atomics_contended_across_blocks():
    rng = np.random.default_rng(10)
    x = rng.integers(-10**6, 10**6, N, dtype=np.int32)
    acc = np.array([5, 5, 2**31 - 1, -2**31, -1, 0, 0, 0], dtype=np.int32)
    uacc = np.array([2**32 - 1, 0, 0], dtype=np.uint32)
    hist = np.zeros(16, dtype=np.int32)
    RawKernel(INT_CODE, "contend")((BLOCKS,), (THREADS,), (x, acc, uacc, hist))
    i = np.arange(N)
    bits = np.bitwise_or.reduce(1 << (i % 31)).astype(np.int32)
    expected = [5 + x.sum(), 5 - x.sum(), x.min(), x.max(), ~bits, bits,
                np.bitwise_xor.reduce(x), N]
    np.testing.assert_array_equal(acc, np.array(expected, dtype=np.int64).astype(np.int32))
    u = x.view(np.uint32)
    np.testing.assert_array_equal(uacc, [u.min(), u.max(), 3 * N])
    np.testing.assert_array_equal(hist, np.bincount((x & 0x7FFFFFFF) % 16, minlength=16))


def test_64_bit_atomics():
    code = r"""
    extern "C" __global__ void wide(const long long* x, unsigned long long* acc, long long* mm) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      atomicAdd(&acc[0], (unsigned long long)x[i] << 20);
      atomicOr(&acc[1], 1ull << (i % 64));
      atomicXor(&acc[2], (unsigned long long)x[i]);
      atomicAnd(&acc[3], ~(1ull << (i % 61)));
      atomicMin(&mm[0], x[i]);
      atomicMax(&mm[1], x[i]);
    }"""
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2**40, N, dtype=np.int64)
    x[::7] *= -1
    acc = np.array([0, 0, 0, 2**64 - 1], dtype=np.uint64)
    mm = np.array([2**63 - 1, -2**63], dtype=np.int64)
    RawKernel(code, "wide")((BLOCKS,), (THREADS,), (x, acc, mm))
    u = x.view(np.uint64)
    total = sum(int(v) << 20 for v in u) % 2**64
    i = np.arange(N)
    low61 = np.bitwise_or.reduce(np.uint64(1) << (i % 61).astype(np.uint64))
    expected = [total, 2**64 - 1, int(np.bitwise_xor.reduce(u)), int(~low61)]
    np.testing.assert_array_equal(acc, np.array(expected, dtype=np.uint64))
    np.testing.assert_array_equal(mm, [x.min(), x.max()])


def test_float_and_double_atomic_add_of_exact_values():
    code = r"""
    extern "C" __global__ void sums(const float* x, float* fsum, double* dsum) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      atomicAdd(&fsum[i % 4], x[i]);
      atomicAdd(&dsum[i % 2], (double)x[i] * 0.125);
    }"""
    rng = np.random.default_rng(12)
    # Multiples of 1/4 with small totals: every partial sum is exact, in any order.
    x = (rng.integers(-400, 400, N) / 4).astype(np.float32)
    fsum = np.zeros(4, dtype=np.float32)
    dsum = np.array([1.5, -2.0])
    RawKernel(code, "sums")((BLOCKS,), (THREADS,), (x, fsum, dsum))
    np.testing.assert_array_equal(fsum, x.astype(np.float64).reshape(-1, 4).sum(axis=0))
    np.testing.assert_array_equal(dsum, [1.5, -2.0] + (x.astype(np.float64) * 0.125)
                                  .reshape(-1, 2).sum(axis=0))


def test_atomic_exch_returns_a_permutation_of_the_values():
    code = r"""
    extern "C" __global__ void swap_in(int* slot, int* old) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      old[i] = atomicExch(&slot[i % 3], i + 100);
    }"""
    slot = np.array([-1, -2, -3], dtype=np.int32)
    old = np.zeros(N, dtype=np.int32)
    RawKernel(code, "swap_in")((BLOCKS,), (THREADS,), (slot, old))
    i = np.arange(N)
    for k in range(3):
        # Each slot's chain of exchanges: returned values plus the final one are the initial
        # value and every value written into that slot, each exactly once.
        seen = np.sort(np.append(old[i % 3 == k], slot[k]))
        np.testing.assert_array_equal(seen, np.sort(np.append(i[i % 3 == k] + 100, -(k + 1))))


def test_atomic_cas_loop_and_single_winner():
    code = r"""
    __device__ int cas_add(int* address, int value) {
      int old = *address, assumed;
      do {
        assumed = old;
        old = atomicCAS(address, assumed, assumed + value);
      } while (assumed != old);
      return old;
    }
    extern "C" __global__ void claim(int* total, int* owner, int* wins) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      cas_add(total, i % 10);
      if (atomicCAS(&owner[blockIdx.x], -1, i) == -1) atomicAdd(wins, 1);
    }"""
    total = np.zeros(1, dtype=np.int32)
    owner = np.full(BLOCKS, -1, dtype=np.int32)
    wins = np.zeros(1, dtype=np.int32)
    RawKernel(code, "claim")((BLOCKS,), (THREADS,), (total, owner, wins))
    assert total[0] == (np.arange(N) % 10).sum()
    assert wins[0] == BLOCKS
    assert all(b * THREADS <= o < (b + 1) * THREADS for b, o in enumerate(owner))


@pytest.mark.parametrize("limit", [9, 16, 1000])
def test_atomic_inc_dec_wrap(limit):
    code = r"""
    extern "C" __global__ void wrap(unsigned* counters, unsigned* olds, unsigned limit) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      olds[2 * i] = atomicInc(&counters[0], limit);
      olds[2 * i + 1] = atomicDec(&counters[1], limit);
    }"""
    counters = np.zeros(2, dtype=np.uint32)
    olds = np.zeros(2 * N, dtype=np.uint32)
    RawKernel(code, "wrap")((BLOCKS,), (THREADS,), (counters, olds, np.uint32(limit)))
    period = limit + 1
    # atomicInc: ((old >= limit) ? 0 : old + 1); atomicDec: ((old == 0 || old > limit) ? limit
    # : old - 1). From 0, both cycle through 0..limit; each value is returned once per lap.
    assert counters[0] == N % period
    assert counters[1] == (-N) % period
    inc_seq = np.arange(N) % period
    dec_seq = (-np.arange(N)) % period
    np.testing.assert_array_equal(np.sort(olds[0::2]), np.sort(inc_seq))
    np.testing.assert_array_equal(np.sort(olds[1::2]), np.sort(dec_seq))


def test_shared_memory_atomics_then_global():
    code = r"""
    extern "C" __global__ void histogram(const unsigned char* data, int n, unsigned* bins) {
      __shared__ unsigned local[32];
      if (threadIdx.x < 32) local[threadIdx.x] = 0;
      __syncthreads();
      for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i] % 32], 1u);
      __syncthreads();
      if (threadIdx.x < 32) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
    }"""
    rng = np.random.default_rng(13)
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    bins = np.zeros(32, dtype=np.uint32)
    RawKernel(code, "histogram")((4,), (64,), (data, np.int32(data.size), bins))
    np.testing.assert_array_equal(bins, np.bincount(data % 32, minlength=32))


def test_half_atomic_add_of_exact_values():
    code = r"""
    #include <cuda_fp16.h>
    extern "C" __global__ void hsum(const __half* x, __half* out) {
      atomicAdd(&out[threadIdx.x % 2], x[blockIdx.x * blockDim.x + threadIdx.x]);
    }"""
    x = (np.arange(256) % 8 - 3).astype(np.float16)  # small integers: every sum exact in half
    out = np.zeros(2, dtype=np.float16)
    RawKernel(code, "hsum")((2,), (128,), (x, out))
    np.testing.assert_array_equal(out, x.astype(np.float64).reshape(-1, 2).sum(axis=0))
