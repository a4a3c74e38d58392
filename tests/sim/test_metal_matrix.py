"""simdgroup_matrix 8x8 (float, half, bfloat) in metal_sim: load/store with stride, origin and
transpose, multiply, multiply_accumulate, make_filled, the diagonal constructor and
thread_elements() in MLX's lane layout. One SIMD-group of 32 threads per kernel."""

import mlx.core as mx
import numpy as np
import pytest

from runners.metal_sim import metal_kernel
from runners.simfaults import KernelFault

RNG = np.random.default_rng(13)
A = RNG.integers(-3, 4, (8, 8)).astype(np.float32)  # small integers: products are exact
B = RNG.integers(-3, 4, (8, 8)).astype(np.float32)
C = RNG.integers(-3, 4, (8, 8)).astype(np.float32)


def run(source, inputs, out_shapes, dtype=mx.float32, tg=32, init_value=None):
    names = [f"out{k}" for k in range(len(out_shapes))]
    k = metal_kernel(name="sgmat", input_names=list(inputs), output_names=names, source=source)
    outs = k(inputs=list(inputs.values()), grid=(tg, 1, 1), threadgroup=(tg, 1, 1),
             output_shapes=out_shapes, output_dtypes=[dtype] * len(out_shapes),
             init_value=init_value)
    return [np.array(o.astype(mx.float32)) for o in outs]


def _mx(a, dtype=mx.float32):
    return mx.array(a).astype(dtype)


@pytest.mark.parametrize(("ty", "dtype"), [("float", mx.float32), ("half", mx.float16),
                                           ("bfloat", mx.bfloat16)])
def test_multiply_and_multiply_accumulate(ty, dtype):
    src = f"""
    simdgroup_{ty}8x8 a, b, c, d;
    simdgroup_load(a, A);
    simdgroup_load(b, B);
    simdgroup_load(c, C);
    simdgroup_multiply(d, a, b);
    simdgroup_store(d, out0);
    simdgroup_multiply_accumulate(d, a, b, c);
    simdgroup_store(d, out1);
    """
    prod, acc = run(src, {"A": _mx(A, dtype), "B": _mx(B, dtype), "C": _mx(C, dtype)},
                    [(8, 8), (8, 8)], dtype)
    np.testing.assert_array_equal(prod, A @ B)
    np.testing.assert_array_equal(acc, A @ B + C)


def test_float_multiply_with_fractions():
    a = RNG.standard_normal((8, 8)).astype(np.float32)
    b = RNG.standard_normal((8, 8)).astype(np.float32)
    src = """
    simdgroup_float8x8 x, y, z;
    simdgroup_load(x, A);
    simdgroup_load(y, B);
    simdgroup_multiply(z, x, y);
    simdgroup_store(z, out0);
    """
    got, = run(src, {"A": _mx(a), "B": _mx(b)}, [(8, 8)])
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_load_and_store_with_stride_and_origin():
    src = """
    simdgroup_float8x8 m;
    simdgroup_load(m, S, 16, ulong2(4, 2));          // origin (x = column 4, y = row 2)
    simdgroup_store(m, out0, 16, ulong2(8, 3));      // into rows 3-10, columns 8-15
    """
    s = np.arange(12 * 16, dtype=np.float32).reshape(12, 16)
    got, = run(src, {"S": _mx(s)}, [(16, 16)], init_value=0)
    want = np.zeros((16, 16), np.float32)
    want[3:11, 8:16] = s[2:10, 4:12]
    np.testing.assert_array_equal(got, want)


def test_load_and_store_transposed():
    src = """
    simdgroup_float8x8 m, n;
    simdgroup_load(m, A, 8, ulong2(0, 0), true);
    simdgroup_store(m, out0);
    simdgroup_load(n, B);
    simdgroup_store(n, out1, 8, ulong2(0, 0), true);
    simdgroup_store(n, out2, 12);
    """
    at, bt, strided = run(src, {"A": _mx(A), "B": _mx(B)}, [(8, 8), (8, 8), (8, 12)],
                          init_value=-1)
    np.testing.assert_array_equal(at, A.T)
    np.testing.assert_array_equal(bt, B.T)
    np.testing.assert_array_equal(strided[:, :8], B)
    np.testing.assert_array_equal(strided[:, 8:], -1)  # untouched beyond the 8 columns


def test_make_filled_and_diagonal_constructor():
    src = """
    simdgroup_float8x8 b, d;
    simdgroup_load(b, B);
    simdgroup_float8x8 f = make_filled_simdgroup_matrix<float, 8, 8>(2.5f);
    simdgroup_multiply(d, f, b);
    simdgroup_store(d, out0);
    simdgroup_float8x8 diag(3.0f);
    simdgroup_multiply(d, b, diag);
    simdgroup_store(d, out1);
    """
    filled, diag = run(src, {"B": _mx(B)}, [(8, 8), (8, 8)])
    np.testing.assert_array_equal(filled, np.full((8, 8), 2.5) @ B)
    np.testing.assert_array_equal(diag, 3 * B)


def _mlx_coords():
    """Row and first column of each lane's two elements, as MLX's MMAFrag::get_coord says."""
    lane = np.arange(32)
    q = lane // 4
    return (q & 4) + (lane // 2) % 4, (q & 2) * 2 + (lane % 2) * 2


def test_thread_elements_follow_mlx_lane_layout():
    src = """
    uint l = thread_index_in_simdgroup;
    simdgroup_float8x8 a;
    simdgroup_load(a, A);
    out0[2 * l] = a.thread_elements()[0];
    out0[2 * l + 1] = a.thread_elements()[1];
    simdgroup_float8x8 w;
    w.thread_elements()[0] = float(2 * l);
    w.thread_elements()[1] = float(2 * l + 1);
    simdgroup_store(w, out1);
    """
    elems, written = run(src, {"A": _mx(A)}, [(64,), (8, 8)])
    row, col = _mlx_coords()
    np.testing.assert_array_equal(elems.reshape(32, 2), np.stack([A[row, col], A[row, col + 1]],
                                                                 axis=1))
    want = np.empty((8, 8))
    want[row, col], want[row, col + 1] = 2 * np.arange(32), 2 * np.arange(32) + 1
    np.testing.assert_array_equal(written, want)


def test_multiply_needs_all_32_lanes():
    src = """
    simdgroup_float8x8 a;
    simdgroup_load(a, A);
    simdgroup_multiply(a, a, a);
    simdgroup_store(a, out0);
    """
    with pytest.raises(KernelFault) as err:
        run(src, {"A": _mx(A)}, [(8, 8)], tg=16, init_value=0)
    assert "divergence" in {f.kind for f in err.value.findings}


def test_a_diagonal_matrix_without_loads_or_stores_has_each_lane_s_elements():
    """A kernel whose only SIMD-group code is a diagonal simdgroup_matrix, read back through
    thread_elements: its constructor reads the lane from the runtime's thread state, so it
    keeps the plain thread loop (in a work-item loop every lane saw one lane's place)."""
    src = """
    uint l = thread_index_in_simdgroup;
    simdgroup_float8x8 d(2.0f);
    out0[2 * l] = d.thread_elements()[0];
    out0[2 * l + 1] = d.thread_elements()[1];
    """
    (out,) = run(src, {}, [(64,)])
    (ref,) = run("""
    simdgroup_float8x8 d(2.0f);
    simdgroup_store(d, out0);
    """, {}, [(8, 8)])
    np.testing.assert_array_equal(ref, 2.0 * np.eye(8, dtype=np.float32))
    assert sorted(out.tolist()) == sorted(ref.ravel().tolist())  # the same 64 elements
    assert out.sum() == 16.0
