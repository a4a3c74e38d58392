"""SIMD-group and quad-group functions, barriers, divergence and a partial SIMD-group in
metal_sim, against lane-by-lane numpy references. The functions of one family share a kernel
(one output column each): it compiles once and each case relaunches it from the build cache."""

import mlx.core as mx
import numpy as np
import pytest

from runners.metal_sim import metal_kernel
from runners.simfaults import KernelFault

N, TG = 128, 64  # two threadgroups of two full SIMD-groups
RNG = np.random.default_rng(3)
XS = RNG.integers(-9, 10, N).astype(np.float32)  # small integers: sums are exact
FS = RNG.integers(100, 200, N).astype(np.float32)  # filling values, distinct from XS
PS = RNG.choice(np.array([1, -1, 2, 0.5, 1, 1], np.float32), N)  # exact products
LOAD = """
uint i = thread_position_in_grid.x;
uint lane = thread_index_in_simdgroup;
ushort ql = ushort(thread_index_in_quadgroup);
float x = xs[i], f = fs[i], p = ps[i];
"""


def run(source, inputs, n_out, dtype=mx.float32, grid=(N, 1, 1), tg=(TG, 1, 1), name="simd"):
    k = metal_kernel(name=name, input_names=list(inputs), output_names=["out"], source=source)
    out, = k(inputs=[mx.array(v) for v in inputs.values()], grid=grid, threadgroup=tg,
             output_shapes=[(n_out,)], output_dtypes=[dtype])
    return np.array(out)


# ---- lane references on (rows, w) arrays: w = 32 for simd_*, 4 for quad_* ------------------

def _each(fn, w):
    """Apply fn(x, f, p, lane) to rows of w lanes; returns a flat array."""
    def apply(x, f, p):
        lane = np.arange(w)
        r = [a.reshape(-1, w) for a in (x, f, p)]
        return np.asarray(fn(*r, lane), np.float64).reshape(-1)
    return apply


def _bcast(v, w):
    return np.repeat(v[:, None], w, axis=1)


def _at(a, idx):
    """a[:, idx] with idx clipped into the row (np.where evaluates both branches)."""
    return a[:, np.clip(idx, 0, a.shape[1] - 1)]


def _fill_up(x, f, lane, d, mod):
    base, q = lane & ~(mod - 1), lane % mod
    return np.where(q < d, _at(f, base + mod - d + q), _at(x, lane - d))


def _fill_down(x, f, lane, d, mod):
    base, q = lane & ~(mod - 1), lane % mod
    return np.where(q + d >= mod, _at(f, base + q + d - mod), _at(x, lane + d))


def _up(x, lane, d):
    return np.where(lane >= d, _at(x, lane - d), x)


def _down(x, lane, d):
    return np.where(lane + d < x.shape[1], _at(x, lane + d), x)


def _family(prefix, w):
    """(expression, reference) of the reductions, scans and shuffles of simd_ or quad_."""
    def red(op):
        return lambda x, f, p, lane: _bcast(op(x, axis=1), w)
    own = "lane" if w == 32 else "ql"
    shuffle_src = "(lane * 7 + 3) % 32" if w == 32 else "3 - ql"
    return {
        "sum": (f"{prefix}_sum(x)", red(np.sum)),
        "max": (f"{prefix}_max(x)", red(np.max)),
        "min": (f"{prefix}_min(x)", red(np.min)),
        "product": (f"{prefix}_product(p)", lambda x, f, p, lane: _bcast(p.prod(1), w)),
        "prefix_inclusive_sum": (f"{prefix}_prefix_inclusive_sum(x)",
                                 lambda x, f, p, lane: np.cumsum(x, 1)),
        "prefix_exclusive_sum": (f"{prefix}_prefix_exclusive_sum(x)",
                                 lambda x, f, p, lane: np.cumsum(x, 1) - x),
        "prefix_inclusive_product": (f"{prefix}_prefix_inclusive_product(p)",
                                     lambda x, f, p, lane: np.cumprod(p, 1)),
        "prefix_exclusive_product": (f"{prefix}_prefix_exclusive_product(p)",
                                     lambda x, f, p, lane: np.cumprod(p, 1) / p),
        "shuffle": (f"{prefix}_shuffle(x, {shuffle_src})",
                    lambda x, f, p, lane: x[:, (lane * 7 + 3) % 32 if w == 32 else 3 - lane]),
        "shuffle_up": (f"{prefix}_shuffle_up(x, 3)" if w == 32 else f"{prefix}_shuffle_up(x, 1)",
                       lambda x, f, p, lane: _up(x, lane, 3 if w == 32 else 1)),
        "shuffle_down": (f"{prefix}_shuffle_down(x, {5 if w == 32 else 2})",
                         lambda x, f, p, lane: _down(x, lane, 5 if w == 32 else 2)),
        "shuffle_xor": (f"{prefix}_shuffle_xor(x, {6 if w == 32 else 3})",
                        lambda x, f, p, lane: x[:, lane ^ (6 if w == 32 else 3)]),
        "shuffle_and_fill_up": (f"{prefix}_shuffle_and_fill_up(x, f, 3)",
                                lambda x, f, p, lane: _fill_up(x, f, lane, 3, w)),
        "shuffle_and_fill_down": (f"{prefix}_shuffle_and_fill_down(x, f, 1)",
                                  lambda x, f, p, lane: _fill_down(x, f, lane, 1, w)),
        "shuffle_rotate_up": (f"{prefix}_shuffle_rotate_up(x, {5 if w == 32 else 1})",
                              lambda x, f, p, lane: x[:, (lane - (5 if w == 32 else 1)) % w]),
        "shuffle_rotate_down": (f"{prefix}_shuffle_rotate_down(x, {9 if w == 32 else 3})",
                                lambda x, f, p, lane: x[:, (lane + (9 if w == 32 else 3)) % w]),
        "broadcast": (f"{prefix}_broadcast(x, 2)", lambda x, f, p, lane: _bcast(x[:, 2], w)),
        "broadcast_first": (f"{prefix}_broadcast_first(x)",
                            lambda x, f, p, lane: _bcast(x[:, 0], w)),
        "is_first": (f"float({prefix}_is_first())",
                     lambda x, f, p, lane: np.broadcast_to(lane == 0, x.shape)),
        "all_any": (f"float({prefix}_all(x > -8.0f)) + 2.0f * float({prefix}_any(x > 8.0f))",
                    lambda x, f, p, lane: _bcast((x > -8).all(1) + 2.0 * (x > 8).any(1), w)),
        f"{own}_is_own_index": (f"float({own})",
                                lambda x, f, p, lane: np.broadcast_to(lane, x.shape)),
    }


SIMD_EXTRA = {
    "fill_up_modulo8": ("simd_shuffle_and_fill_up(x, f, 2, 8)",
                        lambda x, f, p, lane: _fill_up(x, f, lane, 2, 8)),
    "fill_down_modulo8": ("simd_shuffle_and_fill_down(x, f, 3, 8)",
                          lambda x, f, p, lane: _fill_down(x, f, lane, 3, 8)),
    "and_or_xor": ("float(simd_and(int(x) + 16) + 100 * simd_or(int(x) & 7) + 10000 * "
                   "simd_xor(int(f)))",
                   lambda x, f, p, lane: _bcast(
                       np.bitwise_and.reduce(x.astype(int) + 16, 1)
                       + 100 * np.bitwise_or.reduce(x.astype(int) & 7, 1)
                       + 10000 * np.bitwise_xor.reduce(f.astype(int), 1), 32)),
    "sum_half": ("float(simd_sum(half(x)))", lambda x, f, p, lane: _bcast(x.sum(1), 32)),
    "max_int": ("float(simd_max(int(x) * 3))", lambda x, f, p, lane: _bcast(x.max(1) * 3, 32)),
    "sum_float2": ("simd_sum(float2(x, f)).y - simd_prefix_exclusive_sum(float2(x, f)).x",
                   lambda x, f, p, lane: _bcast(f.sum(1), 32) - (np.cumsum(x, 1) - x)),
    "shuffle_uint": ("float(simd_shuffle(uint(f), 31 - lane))",
                     lambda x, f, p, lane: f[:, 31 - lane]),
}

FAMILIES = {
    "simd": ({**_family("simd", 32), **SIMD_EXTRA}, 32),
    "quad": (_family("quad", 4), 4),
}
CASES = [(fam, name) for fam, (cases, _) in FAMILIES.items() for name in cases]


def _columns_source(cases) -> str:
    lines = [LOAD] + [f"out[{k * N} + i] = {expr};" for k, (expr, _) in
                      enumerate(cases.values())]
    return "\n".join(lines)


@pytest.mark.parametrize(("family", "name"), CASES, ids=[f"{f}_{n}" for f, n in CASES])
def test_collective(family, name):
    cases, w = FAMILIES[family]
    got = run(_columns_source(cases), {"xs": XS, "fs": FS, "ps": PS}, len(cases) * N,
              name=f"collective_{family}")
    column = list(cases).index(name)
    want = _each(cases[name][1], w)(XS.astype(np.float64), FS.astype(np.float64), PS)
    np.testing.assert_array_equal(got[column * N:(column + 1) * N], want)


def test_ballot_and_votes():
    src = LOAD + """
    simd_vote v = simd_ballot(x > 0.0f);
    ulong bits = (ulong)v;
    out[4 * i] = uint(bits);
    out[4 * i + 1] = uint(bits >> 32);
    out[4 * i + 2] = uint(v.any()) + 2u * uint(simd_ballot(x > -100.0f).all());
    out[4 * i + 3] = uint((ushort)quad_ballot(x > 0.0f));
    """
    got = run(src, {"xs": XS, "fs": FS, "ps": PS}, 4 * N, mx.uint32, name="ballot").reshape(N, 4)
    pos = (XS > 0).reshape(-1, 32)
    mask = (pos * (1 << np.arange(32, dtype=np.uint64))).sum(1).astype(np.uint64)
    np.testing.assert_array_equal(got[:, 0], np.repeat(mask, 32))
    np.testing.assert_array_equal(got[:, 1], 0)
    np.testing.assert_array_equal(got[:, 2], 1 + 2)
    quads = (XS > 0).reshape(-1, 4) @ (1 << np.arange(4))
    np.testing.assert_array_equal(got[:, 3], np.repeat(quads, 4))


def test_collectives_under_divergence_see_active_lanes_only():
    src = LOAD + """
    float r[6] = {-1, -1, -1, -1, -1, -1};
    if (lane % 3 != 0) {
      r[0] = simd_sum(x);
      r[1] = simd_prefix_exclusive_sum(x);
      r[2] = simd_broadcast_first(x);
      r[3] = float(simd_is_first());
      r[4] = float(uint((ulong)simd_ballot(x >= 0.0f)) & 0xFFFFu);
      r[5] = quad_sum(x);
    } else {
      r[0] = simd_max(x);
    }
    for (int k = 0; k < 6; ++k) out[6 * i + k] = r[k];
    """
    got = run(src, {"xs": XS, "fs": FS, "ps": PS}, 6 * N, name="diverge").reshape(-1, 32, 6)
    x = XS.reshape(-1, 32).astype(np.float64)
    lane = np.arange(32)
    act = lane % 3 != 0
    xa = np.where(act, x, 0)
    want = np.full(got.shape, -1.0)
    want[:, :, 0] = np.where(act, _bcast(xa.sum(1), 32), _bcast(np.where(act, -99, x).max(1), 32))
    want[:, act, 1] = (np.cumsum(xa, 1) - xa)[:, act]
    want[:, act, 2] = x[:, [1]]  # lane 1 is the lowest active lane
    want[:, act, 3] = lane[act] == 1
    ballot = ((x >= 0) & act) @ (1 << lane).astype(np.float64)
    want[:, act, 4] = _bcast(ballot % 65536, 32)[:, act]
    quad = xa.reshape(-1, 8, 4).sum(2)
    want[:, act, 5] = np.repeat(quad, 4, axis=1)[:, act]
    np.testing.assert_array_equal(got, want)


def test_partial_last_simdgroup_of_a_threadgroup_of_48():
    src = LOAD + """
    out[8 * i] = simd_sum(x);
    out[8 * i + 1] = simd_max(x);
    out[8 * i + 2] = simd_prefix_inclusive_sum(x);
    out[8 * i + 3] = float(uint((ulong)simd_ballot(true)) >> 8);
    out[8 * i + 4] = float(simd_all(x > -100.0f));
    out[8 * i + 5] = simdgroups_per_threadgroup;
    out[8 * i + 6] = simdgroup_index_in_threadgroup * 100 + lane;
    out[8 * i + 7] = threads_per_simdgroup;
    """
    got = run(src, {"xs": XS[:96], "fs": FS[:96], "ps": PS[:96]}, 8 * 96, grid=(96, 1, 1),
              tg=(48, 1, 1), name="partial").reshape(96, 8)
    # Per threadgroup of 48: SIMD-group 0 has lanes 0-31, SIMD-group 1 lanes 0-15.
    segments = [(0, 32), (32, 48), (48, 80), (80, 96)]
    for lo, hi in segments:
        x = XS[lo:hi].astype(np.float64)
        width = hi - lo
        seg = got[lo:hi]
        np.testing.assert_array_equal(seg[:, 0], x.sum())
        np.testing.assert_array_equal(seg[:, 1], x.max())
        np.testing.assert_array_equal(seg[:, 2], np.cumsum(x))
        np.testing.assert_array_equal(seg[:, 3], ((1 << width) - 1) >> 8)
        np.testing.assert_array_equal(seg[:, 4], 1)
        np.testing.assert_array_equal(seg[:, 5], 2)
        np.testing.assert_array_equal(seg[:, 6], (lo % 48 // 32) * 100 + np.arange(width))
        np.testing.assert_array_equal(seg[:, 7], 32)


# ---- barriers -------------------------------------------------------------------------------

def test_threadgroup_barrier_tree_reduction():
    src = """
    threadgroup float s[64];
    uint t = thread_position_in_threadgroup.x;
    s[t] = xs[thread_position_in_grid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = 32; stride > 0; stride /= 2) {
      if (t < stride) s[t] += s[t + stride];
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (t == 0) out[threadgroup_position_in_grid.x] = s[0];
    """
    got = run(src, {"xs": XS}, 2, name="tree")
    np.testing.assert_array_equal(got, XS.reshape(2, 64).sum(1))


def test_simdgroup_barrier_orders_threadgroup_memory_within_a_simdgroup():
    src = """
    threadgroup float s[64];
    uint t = thread_index_in_threadgroup;
    uint lane = thread_index_in_simdgroup;
    s[t] = xs[thread_position_in_grid.x] * 2.0f;
    simdgroup_barrier(mem_flags::mem_threadgroup);
    out[thread_position_in_grid.x] = s[t - lane + (lane + 1) % 32];
    """
    got = run(src, {"xs": XS}, N, name="sgbar")
    want = (2 * XS).reshape(-1, 32)[:, (np.arange(32) + 1) % 32].reshape(-1)
    np.testing.assert_array_equal(got, want)


def test_barrier_reached_by_part_of_the_group_is_divergence():
    src = """
    uint t = thread_position_in_threadgroup.x;
    if (t < 16) threadgroup_barrier(mem_flags::mem_none);
    out[thread_position_in_grid.x] = xs[thread_position_in_grid.x];
    """
    with pytest.raises(KernelFault) as err:
        run(src, {"xs": XS}, N, name="badbar")
    assert "divergence" in {f.kind for f in err.value.findings}


def test_missing_barrier_is_a_race():
    src = """
    threadgroup float s[64];
    uint t = thread_position_in_threadgroup.x;
    s[t] = xs[thread_position_in_grid.x];
    out[thread_position_in_grid.x] = s[63 - t];
    """
    with pytest.raises(KernelFault) as err:
        run(src, {"xs": XS}, N, name="race")
    assert "race" in {f.kind for f in err.value.findings}
