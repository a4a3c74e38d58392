"""How metal_sim launches a kernel, as `mx.fast.metal_kernel` does: template arguments, header
helpers, `_shape`/`_strides`/`_ndim`, 0-d inputs and Python scalars, init_value and NaN-poisoned
outputs, geometry (non-uniform edge groups, a threadgroup clamped to the grid, every
thread-position attribute), float16/bfloat16 buffers, and compile errors located in the user's
own files."""

import mlx.core as mx
import numpy as np
import pytest

from runners.metal_sim import metal_kernel
from runners.simfaults import CompileError, KernelFault

RNG = np.random.default_rng(17)


def _bf16_round(x):
    """float32 -> bfloat16 (round to nearest even) -> float32, in numpy."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def _np(a):
    return np.array(a.astype(mx.float32) if a.dtype == mx.bfloat16 else a)


# ---- templates, header helpers, input metadata ------------------------------------------------

@pytest.mark.parametrize(("n", "neg", "dtype"), [(3, True, mx.float16), (2, False, mx.bfloat16),
                                                 (5, True, mx.int32)])
def test_template_int_bool_and_dtype_arguments(n, neg, dtype):
    k = metal_kernel(name="tmpl", input_names=["inp"], output_names=["out"], source="""
        uint i = thread_position_in_grid.x;
        T v = static_cast<T>(inp[i]) * static_cast<T>(N);
        out[i] = NEG ? T(-v) : v;
    """)
    inp = RNG.integers(-20, 20, 16).astype(np.float32)
    out, = k(inputs=[mx.array(inp)], grid=(16, 1, 1), threadgroup=(8, 1, 1),
             output_shapes=[(16,)], output_dtypes=[dtype],
             template=[("N", n), ("NEG", neg), ("T", dtype)])
    assert out.dtype == dtype
    np.testing.assert_array_equal(_np(out), inp * n * (-1 if neg else 1))


def test_template_helper_in_header():
    header = """
    template <typename T>
    inline T twice(T x) { return x + x; }
    inline float affine(float x, const constant float* ab) { return ab[0] * x + ab[1]; }
    """
    k = metal_kernel(name="hdr", input_names=["x", "ab"], output_names=["out"], header=header,
                     source="""
        uint i = thread_position_in_grid.x;
        out[i] = twice(affine(x[i], ab)) + float(twice(int(i)));
    """)
    x = RNG.standard_normal(8).astype(np.float32)
    out, = k(inputs=[mx.array(x), mx.array([1.5, -0.25])], grid=(8, 1, 1),
             threadgroup=(8, 1, 1), output_shapes=[(8,)], output_dtypes=[mx.float32])
    np.testing.assert_allclose(np.array(out), 2 * (1.5 * x - 0.25) + 2 * np.arange(8), rtol=1e-6)


def test_shape_strides_and_ndim_of_an_input():
    k = metal_kernel(name="meta", input_names=["a"], output_names=["meta", "vals"], source="""
        uint e = thread_position_in_grid.x;
        if (e < 3) {
          meta[e] = a_shape[e];
          meta[3 + e] = int(a_strides[e]);
        }
        if (e == 0) meta[6] = a_ndim;
        vals[e] = a[elem_to_loc(e, a_shape, a_strides, a_ndim)] * 10.0f;
    """)
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = mx.array(base).transpose(2, 1, 0)  # not row-contiguous: metal_kernel copies it
    meta, vals = k(inputs=[a], grid=(24, 1, 1), threadgroup=(8, 1, 1),
                   output_shapes=[(7,), (24,)], output_dtypes=[mx.int32, mx.float32])
    np.testing.assert_array_equal(np.array(meta), [4, 3, 2, 6, 2, 1, 3])
    np.testing.assert_array_equal(np.array(vals), base.transpose(2, 1, 0).reshape(-1) * 10)


def test_python_scalars_are_constant_references():
    k = metal_kernel(name="scalars", input_names=["a", "n", "f", "flag"],
                     output_names=["out"], source="""
        uint i = thread_position_in_grid.x;
        const constant int& n_ref = n;   // int -> int32_t&, float -> float&, bool -> bool&
        out[i] = flag ? a[i] * f + float(n_ref) : -1.0f;
    """)
    a = RNG.standard_normal(8).astype(np.float32)
    for flag in (True, False):
        out, = k(inputs=[mx.array(a), 3, 0.75, flag], grid=(8, 1, 1), threadgroup=(8, 1, 1),
                 output_shapes=[(8,)], output_dtypes=[mx.float32])
        want = a * 0.75 + 3 if flag else np.full(8, -1.0)
        np.testing.assert_allclose(np.array(out), want, rtol=1e-6)


def test_zero_d_array_input_is_a_constant_reference():
    k = metal_kernel(name="zero_d", input_names=["a", "s"], output_names=["out"], source="""
        uint i = thread_position_in_grid.x;
        out[i] = a[i] * s;
    """)
    a = RNG.standard_normal(8).astype(np.float32)
    out, = k(inputs=[mx.array(a), mx.array(2.5)], grid=(8, 1, 1), threadgroup=(8, 1, 1),
             output_shapes=[(8,)], output_dtypes=[mx.float32])
    np.testing.assert_allclose(np.array(out), a * 2.5, rtol=1e-6)


# ---- output initialisation ----------------------------------------------------------------------

SKIP_ODD = "uint i = thread_position_in_grid.x; if (i % 2 == 0) out[i] = inp[i] + 1.0f;"


def test_init_value_fills_what_the_kernel_skips():
    k = metal_kernel(name="skip", input_names=["inp"], output_names=["out"], source=SKIP_ODD)
    inp = RNG.standard_normal(10).astype(np.float32)
    out, = k(inputs=[mx.array(inp)], grid=(10, 1, 1), threadgroup=(4, 1, 1),
             output_shapes=[(10,)], output_dtypes=[mx.float32], init_value=-3.0)
    want = np.where(np.arange(10) % 2 == 0, inp + 1, -3.0)
    np.testing.assert_allclose(np.array(out), want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_outputs_without_init_value_are_nan_where_unwritten(dtype):
    k = metal_kernel(name="skip", input_names=["inp"], output_names=["out"], source=SKIP_ODD)
    inp = RNG.integers(-8, 8, 10).astype(np.float32)
    out, = k(inputs=[mx.array(inp)], grid=(10, 1, 1), threadgroup=(4, 1, 1),
             output_shapes=[(10,)], output_dtypes=[dtype])
    got = _np(out)
    np.testing.assert_array_equal(got[0::2], inp[0::2] + 1)
    assert np.isnan(got[1::2]).all()


# ---- geometry -----------------------------------------------------------------------------------

GEOMETRY = """
uint3 p = thread_position_in_grid;
uint n = (p.z * threads_per_grid.y + p.y) * threads_per_grid.x + p.x;
out[n * 4 + 0] = threads_per_threadgroup.x * 100 + threads_per_threadgroup.y;
out[n * 4 + 1] = dispatch_threads_per_threadgroup.x * 100 + dispatch_threads_per_threadgroup.y;
out[n * 4 + 2] = threadgroups_per_grid.x * 100 + threadgroups_per_grid.y;
out[n * 4 + 3] = thread_index_in_threadgroup;
"""


@pytest.mark.parametrize(("grid", "tg"), [((10, 1, 1), (4, 1, 1)), ((5, 3, 1), (2, 2, 1)),
                                          ((5, 2, 1), (32, 8, 1)), ((3, 7, 1), (4, 2, 1))],
                         ids=["edge_1d", "edge_2d", "clamped", "clamped_x_edge_y"])
def test_nonuniform_edge_groups_and_clamped_threadgroup(grid, tg):
    k = metal_kernel(name="geom", input_names=["inp"], output_names=["out"], source=GEOMETRY)
    total = grid[0] * grid[1]
    out, = k(inputs=[mx.zeros((1,))], grid=grid, threadgroup=tg, output_shapes=[(total * 4,)],
             output_dtypes=[mx.uint32])
    got = np.array(out).reshape(grid[1], grid[0], 4)
    eff = np.minimum(tg[:2], grid[:2])  # MLX clamps the threadgroup to the grid
    groups = -(-np.array(grid[:2]) // eff)
    y, x = np.mgrid[0:grid[1], 0:grid[0]]
    size_x = np.minimum(eff[0], grid[0] - x // eff[0] * eff[0])  # smaller in the last group
    size_y = np.minimum(eff[1], grid[1] - y // eff[1] * eff[1])
    np.testing.assert_array_equal(got[..., 0], size_x * 100 + size_y)
    np.testing.assert_array_equal(got[..., 1], eff[0] * 100 + eff[1])
    np.testing.assert_array_equal(got[..., 2], groups[0] * 100 + groups[1])
    np.testing.assert_array_equal(got[..., 3], x % eff[0] + y % eff[1] * size_x)


GRID3, TG3 = (16, 4, 3), (8, 4, 2)  # z is non-uniform: the last z group is one thread deep


def _expected_attributes():
    """Every attribute for every thread of GRID3/TG3, computed from Metal's definitions."""
    grid, tg = np.array(GRID3), np.array(TG3)
    z, y, x = np.mgrid[0:grid[2], 0:grid[1], 0:grid[0]]
    pos = np.stack([x, y, z], axis=-1).reshape(-1, 3)
    group, local = pos // tg, pos % tg
    size = np.minimum(tg, grid - group * tg)
    linear = local[:, 0] + local[:, 1] * size[:, 0] + local[:, 2] * size[:, 0] * size[:, 1]
    actual, dispatch = size.prod(1), np.full(len(pos), tg.prod())
    ones = np.ones((len(pos), 3), int)
    return {
        "thread_position_in_grid": pos,
        "thread_position_in_threadgroup": local,
        "threadgroup_position_in_grid": group,
        "threads_per_threadgroup": size,
        "dispatch_threads_per_threadgroup": tg * ones,
        "threadgroups_per_grid": -(-grid // tg) * ones,
        "threads_per_grid": grid * ones,
        "grid_size": grid * ones,  # as threads_per_grid for a plain dispatch (unconfirmed)
        "grid_origin": 0 * ones,
        "thread_index_in_threadgroup": linear,
        "simdgroup_index_in_threadgroup": linear // 32,
        "thread_index_in_simdgroup": linear % 32,
        "simdgroups_per_threadgroup": -(-actual // 32),
        "dispatch_simdgroups_per_threadgroup": -(-dispatch // 32),
        "threads_per_simdgroup": 32 + 0 * linear,
        "thread_execution_width": 32 + 0 * linear,
        "quadgroup_index_in_threadgroup": linear // 4,
        "thread_index_in_quadgroup": linear % 4,
        "quadgroups_per_threadgroup": -(-actual // 4),
        "dispatch_quadgroups_per_threadgroup": -(-dispatch // 4),
    }


ATTRIBUTES = list(_expected_attributes())


def _widths():
    return [v.shape[1] if v.ndim == 2 else 1 for v in _expected_attributes().values()]


def _attribute_source():
    width = sum(_widths())
    lines = ["uint3 p = thread_position_in_grid;",
             f"uint n = (p.z * {GRID3[1]} + p.y) * {GRID3[0]} + p.x;"]
    column = 0
    for name, value in _expected_attributes().items():
        for c in ("x", "y", "z") if value.ndim == 2 else ("",):
            lines.append(f"out[n * {width} + {column}] = {name}{'.' + c if c else ''};")
            column += 1
    return "\n".join(lines)


@pytest.mark.parametrize("attribute", ATTRIBUTES)
def test_thread_position_attribute_on_a_3d_grid(attribute):
    k = metal_kernel(name="attrs", input_names=["inp"], output_names=["out"],
                     source=_attribute_source())
    total, widths = int(np.prod(GRID3)), _widths()
    out, = k(inputs=[mx.zeros((1,))], grid=GRID3, threadgroup=TG3,
             output_shapes=[(total * sum(widths),)], output_dtypes=[mx.uint32])
    got = np.array(out).reshape(total, sum(widths))
    expected = _expected_attributes()
    start = sum(widths[:ATTRIBUTES.index(attribute)])
    want = expected[attribute].reshape(total, -1)
    np.testing.assert_array_equal(got[:, start:start + want.shape[1]], want)


# ---- float16 / bfloat16 buffers -----------------------------------------------------------------

def test_float16_and_bfloat16_inputs_and_outputs():
    k = metal_kernel(name="lowp", input_names=["h", "b"], output_names=["hs", "bp"], source="""
        uint i = thread_position_in_grid.x;
        hs[i] = h[i] + half(float(b[i]));
        bp[i] = bfloat(float(h[i]) * float(b[i]));
    """)
    h = RNG.standard_normal(16).astype(np.float16)
    b32 = _bf16_round(RNG.standard_normal(16).astype(np.float32))
    hs, bp = k(inputs=[mx.array(h), mx.array(b32).astype(mx.bfloat16)], grid=(16, 1, 1),
               threadgroup=(16, 1, 1), output_shapes=[(16,), (16,)],
               output_dtypes=[mx.float16, mx.bfloat16])
    assert (hs.dtype, bp.dtype) == (mx.float16, mx.bfloat16)
    np.testing.assert_array_equal(np.array(hs), h + b32.astype(np.float16))
    np.testing.assert_array_equal(_np(bp), _bf16_round(h.astype(np.float32) * b32))


# ---- faults and compile errors ------------------------------------------------------------------

def test_out_of_bounds_write_is_a_fault():
    k = metal_kernel(name="oob", input_names=["inp"], output_names=["out"],
                     source="uint i = thread_position_in_grid.x;\nout[i + 1] = inp[i];")
    with pytest.raises(KernelFault) as err:
        k(inputs=[mx.zeros((8,))], grid=(8, 1, 1), threadgroup=(8, 1, 1),
          output_shapes=[(8,)], output_dtypes=[mx.float32])
    kinds_lines = {(f.kind, f.line) for f in err.value.findings}
    assert ("out_of_bounds", 2) in kinds_lines


@pytest.mark.parametrize(("where", "line"), [("source.metal", 3), ("header.metal", 2)])
def test_compile_error_names_the_users_file_and_line(where, line):
    header = "inline float one() { return 1.0f; }\n"
    source = "uint i = thread_position_in_grid.x;\nfloat z = one();\n"
    if where == "header.metal":  # (a program-scope variable would be refused before compiling)
        header += "inline float two() { return undeclared_name; }\n"
    else:
        source += "  float y = undeclared_name;\n"
    source += "out[i] = z;"
    k = metal_kernel(name="broken", input_names=["inp"], output_names=["out"], source=source,
                     header=header)
    with pytest.raises(CompileError) as err:
        k(inputs=[mx.zeros((4,))], grid=(4, 1, 1), threadgroup=(4, 1, 1),
          output_shapes=[(4,)], output_dtypes=[mx.float32])
    errors = [d for d in err.value.diagnostics if d.severity == "error"]
    assert errors and (errors[0].file, errors[0].line) == (where, line)
    assert "undeclared_name" in errors[0].message
    run = k.launch(inputs=[mx.zeros((4,))], grid=(4, 1, 1), threadgroup=(4, 1, 1),
                   output_shapes=[(4,)], output_dtypes=[mx.float32])
    assert not run.compiled and not run.ok
