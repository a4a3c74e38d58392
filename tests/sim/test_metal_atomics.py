"""Metal atomics in metal_sim: device atomics through `atomic_outputs=True` (every output is
`device atomic<T>*`, filled with `init_value`) and threadgroup atomics. Many threads in several
threadgroups hit the same few addresses, so lost updates would show."""

import mlx.core as mx
import numpy as np
import pytest

from runners.metal_sim import metal_kernel

N = 256
RNG = np.random.default_rng(5)
VALS = RNG.integers(-1000, 1000, N).astype(np.int32)
BITS = RNG.integers(0, 2**31, N).astype(np.uint32)


def run(source, inputs, n_out, dtype, init_value, atomic=True, tg=64, n=N):
    k = metal_kernel(name="atomics", input_names=list(inputs), output_names=["out"],
                     source=source, atomic_outputs=atomic)
    out, = k(inputs=[mx.array(v) for v in inputs.values()], grid=(n, 1, 1),
             threadgroup=(tg, 1, 1), output_shapes=[(n_out,)], output_dtypes=[dtype],
             init_value=init_value)
    return np.array(out)


def test_int_fetch_operations():
    src = """
    uint i = thread_position_in_grid.x;
    int v = vals[i];
    atomic_fetch_add_explicit(&out[0], v, memory_order_relaxed);
    atomic_fetch_sub_explicit(&out[1], v, memory_order_relaxed);
    atomic_fetch_min_explicit(&out[2], v, memory_order_relaxed);
    atomic_fetch_max_explicit(&out[3], v, memory_order_relaxed);
    atomic_fetch_or_explicit(&out[4], v & 0x3F0, memory_order_relaxed);
    atomic_fetch_xor_explicit(&out[5], v, memory_order_relaxed);
    atomic_fetch_and_explicit(&out[6], v | 0x7FFFF0F0, memory_order_relaxed);
    """
    got = run(src, {"vals": VALS}, 7, mx.int32, init_value=5)
    v = VALS.astype(np.int64)
    want = [5 + v.sum(), 5 - v.sum(), min(5, v.min()), max(5, v.max()),
            5 | np.bitwise_or.reduce(v & 0x3F0), 5 ^ np.bitwise_xor.reduce(v),
            5 & np.bitwise_and.reduce(v | 0x7FFFF0F0)]
    np.testing.assert_array_equal(got, want)


def test_uint_fetch_operations_wrap():
    src = """
    uint i = thread_position_in_grid.x;
    uint b = bits[i];
    atomic_fetch_add_explicit(&out[0], b, memory_order_relaxed);
    atomic_fetch_sub_explicit(&out[1], b, memory_order_relaxed);
    atomic_fetch_and_explicit(&out[2], b | 0xFFFF0000u, memory_order_relaxed);
    atomic_fetch_max_explicit(&out[3], b, memory_order_relaxed);
    atomic_fetch_min_explicit(&out[4], b, memory_order_relaxed);
    """
    got = run(src, {"bits": BITS}, 5, mx.uint32, init_value=float(2**32 - 1))
    total, top = int(BITS.astype(np.uint64).sum()), 2**32 - 1
    want = [(top + total) % 2**32, (top - total) % 2**32,
            top & int(np.bitwise_and.reduce(BITS | 0xFFFF0000)), top, BITS.min()]
    np.testing.assert_array_equal(got, want)


def test_float_fetch_add_and_sub():
    src = """
    uint i = thread_position_in_grid.x;
    atomic_fetch_add_explicit(&out[i % 4], x[i], memory_order_relaxed);
    atomic_fetch_sub_explicit(&out[4], x[i], memory_order_relaxed);
    """
    x = RNG.integers(-50, 50, N).astype(np.float32) * 0.25  # every partial sum is exact
    got = run(src, {"x": x}, 5, mx.float32, init_value=0.5)
    want = np.append(0.5 + x.reshape(-1, 4).sum(0), 0.5 - x.sum())
    np.testing.assert_array_equal(got, want)


def test_exchange_hands_every_old_value_to_exactly_one_thread():
    src = """
    uint i = thread_position_in_grid.x;
    int old = atomic_exchange_explicit(&out[0], int(i) + 1, memory_order_relaxed);
    atomic_store_explicit(&out[1 + i], old, memory_order_relaxed);
    """
    got = run(src, {"vals": VALS}, N + 1, mx.int32, init_value=-7)
    # The final value plus the N old values are the initial value and the N written ones.
    assert sorted(got.tolist()) == sorted([-7] + list(range(1, N + 1)))


def test_compare_exchange_weak_float_max():
    # A float maximum by CAS loop, as MLX's atomic.h does it (Metal has no float fetch_max).
    src = """
    uint i = thread_position_in_grid.x;
    float seen = atomic_load_explicit(&out[i % 3], memory_order_relaxed);
    float mine = float(vals[i]) * 0.5f;
    while (mine > seen && !atomic_compare_exchange_weak_explicit(
        &out[i % 3], &seen, mine, memory_order_relaxed, memory_order_relaxed)) {
    }
    """
    got = run(src, {"vals": VALS[:255]}, 3, mx.float32, init_value=-600.0, n=255, tg=85)
    want = np.maximum(VALS[:255].reshape(-1, 3).max(0) * 0.5, -600.0)
    np.testing.assert_array_equal(got, want)


def test_compare_exchange_counts_every_thread():
    src = """
    uint i = thread_position_in_grid.x;
    int expected = atomic_load_explicit(&out[i % 2], memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&out[i % 2], &expected, expected + vals[i],
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
    """
    got = run(src, {"vals": VALS}, 2, mx.int32, init_value=0)
    np.testing.assert_array_equal(got, VALS.reshape(-1, 2).sum(0))


def test_load_and_store():
    src = """
    uint i = thread_position_in_grid.x;
    atomic_store_explicit(&out[i], vals[i] * 2, memory_order_relaxed);
    int back = atomic_load_explicit(&out[i], memory_order_relaxed);
    atomic_store_explicit(&out[N_ + i], back + 1, memory_order_relaxed);
    """.replace("N_", str(N))
    got = run(src, {"vals": VALS}, 2 * N, mx.int32, init_value=0)
    np.testing.assert_array_equal(got, np.concatenate([VALS * 2, VALS * 2 + 1]))


@pytest.mark.parametrize("ty", ["int", "uint"])
def test_threadgroup_atomics(ty):
    src = f"""
    threadgroup atomic_{ty} counter;
    threadgroup atomic_{ty} hist[8];
    uint t = thread_position_in_threadgroup.x;
    if (t == 0) atomic_store_explicit(&counter, 0, memory_order_relaxed);
    if (t < 8) atomic_store_explicit(&hist[t], 0, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hist[uint(vals[thread_position_in_grid.x]) % 8], 1,
                              memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint g = threadgroup_position_in_grid.x;
    if (t == 0) out[g * 9] = atomic_load_explicit(&counter, memory_order_relaxed);
    if (t < 8) out[g * 9 + 1 + t] = atomic_load_explicit(&hist[t], memory_order_relaxed);
    """
    got = run(src, {"vals": VALS}, 4 * 9, mx.int32 if ty == "int" else mx.uint32,
              init_value=None, atomic=False).reshape(4, 9)
    np.testing.assert_array_equal(got[:, 0], 64)
    buckets = VALS.astype(np.uint32).reshape(4, 64) % 8
    want = np.stack([(buckets == b).sum(1) for b in range(8)], axis=1)
    np.testing.assert_array_equal(got[:, 1:], want)
