"""Metal address spaces, threadgroup arrays, scalar/vector/matrix types and conversions, run in
metal_sim. Every expectation is computed here with numpy from the inputs."""

import mlx.core as mx
import numpy as np
import pytest

from runners.metal_sim import metal_kernel
from runners.simfaults import KernelFault

RNG = np.random.default_rng(7)


def run(source, inputs, out_shape, out_dtype, grid, tg, header="", **kw):
    """Launch `source` with numpy `inputs` (a dict) and one output; returns it as numpy."""
    k = metal_kernel(name="types", input_names=list(inputs), output_names=["out"],
                     source=source, header=header)
    arrays = [mx.array(v) if isinstance(v, np.ndarray) else v for v in inputs.values()]
    out, = k(inputs=arrays, grid=grid, threadgroup=tg, output_shapes=[out_shape],
             output_dtypes=[out_dtype], **kw)
    return np.array(out.astype(mx.float32) if out.dtype == mx.bfloat16 else out)


# ---- address spaces -------------------------------------------------------------------------

def test_device_constant_and_thread_pointers():
    src = """
    uint i = thread_position_in_grid.x;
    const device float* d = inp + i;      // device
    const constant float* c = small;      // fewer than 8 elements: constant
    thread float acc = 1.0f;
    thread float* p = &acc;
    *p += *d * c[i % 4];
    out[i] = acc;
    """
    inp = RNG.standard_normal(16).astype(np.float32)
    small = np.array([2.0, -1.0, 0.5, 3.0], np.float32)
    got = run(src, {"inp": inp, "small": small}, (16,), mx.float32, (16, 1, 1), (16, 1, 1))
    np.testing.assert_allclose(got, 1.0 + inp * np.tile(small, 4), rtol=1e-6)


HELPERS = """
inline void stage(threadgroup float* dst, const device float* src, uint t) {
  dst[t] = src[t] * 2.0f;
}
inline void put(device float* dst, uint i, float v) { dst[i] = v; }
"""


def test_threadgroup_pointer_and_header_helpers():
    src = """
    threadgroup float buf[32];
    uint t = thread_position_in_threadgroup.x;
    uint g = threadgroup_position_in_grid.x;
    threadgroup float* upper = buf + 16;   // a threadgroup pointer into the array
    stage(buf, inp + g * 32, t);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    put(out, g * 32 + t, buf[31 - t] + upper[t % 16]);
    """
    inp = RNG.standard_normal(64).astype(np.float32)
    got = run(src, {"inp": inp}, (64,), mx.float32, (64, 1, 1), (32, 1, 1), header=HELPERS)
    blocks = 2.0 * inp.reshape(2, 32)
    want = blocks[:, ::-1] + blocks[:, 16 + np.arange(32) % 16]
    np.testing.assert_allclose(got, want.reshape(-1), rtol=1e-6)


def test_program_scope_constant_tables():
    header = """
    constant float kScale[4] = {1.5f, -2.0f, 0.25f, 8.0f};
    constant int kOffset = 3;
    """
    src = "uint i = thread_position_in_grid.x; out[i] = inp[i] * kScale[i % 4] + kOffset;"
    inp = RNG.standard_normal(12).astype(np.float32)
    got = run(src, {"inp": inp}, (12,), mx.float32, (12, 1, 1), (4, 1, 1), header=header)
    scale = np.tile(np.array([1.5, -2.0, 0.25, 8.0], np.float32), 3)
    np.testing.assert_allclose(got, inp * scale + 3, rtol=1e-6)


# ---- threadgroup arrays ---------------------------------------------------------------------

def test_threadgroup_2d_array_transposes_tiles():
    src = """
    threadgroup float tile[8][9];
    uint2 t = thread_position_in_threadgroup.xy;
    uint2 g = threadgroup_position_in_grid.xy;
    uint2 p = thread_position_in_grid.xy;
    tile[t.y][t.x] = inp[p.y * 16 + p.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[(g.y * 8 + t.y) * 16 + g.x * 8 + t.x] = tile[t.x][t.y];
    """
    inp = np.arange(16 * 16, dtype=np.float32)
    got = run(src, {"inp": inp}, (256,), mx.float32, (16, 16, 1), (8, 8, 1))
    tiles = inp.reshape(2, 8, 2, 8)  # (gy, ty, gx, tx)
    np.testing.assert_array_equal(got.reshape(2, 8, 2, 8), tiles.transpose(0, 3, 2, 1))


UNINIT = """
threadgroup int s[4];
uint g = threadgroup_position_in_grid.x, t = thread_position_in_threadgroup.x;
if (g == 0) s[t] = 7 + int(t);
threadgroup_barrier(mem_flags::mem_threadgroup);
out[g * 4 + t] = s[t];
"""


def test_threadgroup_memory_is_poisoned_between_groups(monkeypatch):
    # Group 1 never writes `s`: it must not see group 0's values, but 0xFF bytes.
    monkeypatch.setenv("KPORT_SIM_CHECKS", "fast")
    got = run(UNINIT, {"inp": np.zeros(4, np.float32)}, (8,), mx.int32, (8, 1, 1), (4, 1, 1))
    np.testing.assert_array_equal(got, [7, 8, 9, 10, -1, -1, -1, -1])


def test_uninitialised_threadgroup_read_is_reported():
    with pytest.raises(KernelFault) as err:
        run(UNINIT, {"inp": np.zeros(4, np.float32)}, (8,), mx.int32, (8, 1, 1), (4, 1, 1))
    assert {f.kind for f in err.value.findings} == {"uninitialized"}


# ---- scalars and vectors --------------------------------------------------------------------

def _bf16_round(x):
    """float32 -> bfloat16 (round to nearest even) -> float32, in numpy."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


F16 = RNG.uniform(-2, 2, 16).astype(np.float32)
U8 = RNG.integers(0, 256, 16).astype(np.uint8)
I16 = RNG.integers(-20000, 20000, 8).astype(np.int16)
I32 = RNG.integers(-1000, 1000, 12).astype(np.int32)

LOAD4 = ("uint i = thread_position_in_grid.x;\n"
         "float4 v = float4(a[4*i], a[4*i+1], a[4*i+2], a[4*i+3]);\n")


def _swz(a):
    v = a.reshape(4, 4)
    w = v[:, ::-1] + 2.0 * v[:, [0, 0, 1, 1]]
    w[:, [1, 3]] = v[:, [2, 0]]
    return w


def _rgba(a):
    v = a.reshape(4, 4).copy()
    s = v[:, [2, 1, 0]]
    v[:, [0, 1]] = v[:, [3, 3]] * 3.0
    v[:, :3] += s
    return v


def _ctor(a):
    v = a.reshape(4, 4)
    return np.stack([v[:, 0], v[:, 1], v[:, 2], np.ones(4), v[:, 2], v[:, 0], v[:, 1],
                     v[:, 0] + 1], axis=1)


VECTOR_CASES = {
    "float4_swizzles": (
        LOAD4 + "float4 w = v.wzyx + 2.0f * v.xxyy;\nw.yw = v.zx;\n"
        "for (int k = 0; k < 4; ++k) out[4*i+k] = w[k];",
        {"a": F16}, mx.float32, 16, 4, _swz),
    "rgba_and_write_swizzle": (
        LOAD4 + "float3 s = v.bgr;\nv.rg = v.aa * 3.0f;\nv += float4(s, 0.0f);\n"
        "out[4*i] = v.r; out[4*i+1] = v.g; out[4*i+2] = v.b; out[4*i+3] = v.a;",
        {"a": F16}, mx.float32, 16, 4, _rgba),
    "constructors": (
        LOAD4 + "float3 f3 = v.xyz;\nfloat4 p = float4(f3, 1.0f);\n"
        "float4 q = float4(f3.zx, float2(v.y, v.x + 1.0f));\n"
        "for (int k = 0; k < 4; ++k) { out[8*i+k] = p[k]; out[8*i+4+k] = q[k]; }",
        {"a": F16}, mx.float32, 32, 4, _ctor),
    "half4_from_float4": (
        LOAD4 + "half4 h = half4(v);\nh = h * half(2);\n"
        "for (int k = 0; k < 4; ++k) out[4*i+k] = h[k];",
        {"a": F16}, mx.float16, 16, 4, lambda a: a.astype(np.float16) * np.float16(2)),
    "uchar4_wraps": (
        "uint i = thread_position_in_grid.x;\n"
        "uchar4 u = uchar4(a[4*i], a[4*i+1], a[4*i+2], a[4*i+3]);\n"
        "uchar4 w = u + uchar4(200);\nfor (int k = 0; k < 4; ++k) out[4*i+k] = w[k];",
        {"a": U8}, mx.uint8, 16, 4, lambda a: (a.astype(np.int32) + 200) % 256),
    "short2_multiply": (
        "uint i = thread_position_in_grid.x;\n"
        "short2 s = short2(a[2*i], a[2*i+1]) * short2(3, -2);\n"
        "out[2*i] = s.x; out[2*i+1] = s.y;",
        {"a": I16}, mx.int16, 8, 4,
        lambda a: (a.reshape(4, 2).astype(np.int64) * [3, -2]).astype(np.int16).reshape(-1)),
    "int3_uint3": (
        "uint i = thread_position_in_grid.x;\nint3 p = int3(a[3*i], a[3*i+1], a[3*i+2]);\n"
        "uint3 q = uint3(p.zyx) * 2u + uint3(1, 2, 3);\n"
        "for (int k = 0; k < 3; ++k) out[3*i+k] = q[k];",
        {"a": I32}, mx.uint32, 12, 4,
        lambda a: (a.reshape(4, 3)[:, ::-1].astype(np.uint32) * 2 + [1, 2, 3]).reshape(-1)),
    "bool4_masks": (
        LOAD4 + "bool4 m = v > 0.5f;\n"
        "out[i] = int(m.x) + 2 * m.y + 4 * m.z + 8 * m.w + (any(m) ? 16 : 0) + (all(m) ? 32 : 0);",
        {"a": np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1], np.float32)},
        mx.int32, 4, 4,
        lambda a: (a.reshape(4, 4) > 0.5) @ [1, 2, 4, 8] + 16 * (a.reshape(4, 4) > 0.5).any(1)
        + 32 * (a.reshape(4, 4) > 0.5).all(1)),
    "vec_alias": (
        "uint i = thread_position_in_grid.x;\nvec<float, 2> v = {a[2*i], a[2*i+1]};\n"
        "out[i] = dot(v, v.yx);",
        {"a": F16}, mx.float32, 8, 8, lambda a: 2 * a[0::2] * a[1::2]),
}


@pytest.mark.parametrize("case", VECTOR_CASES)
def test_vector_types(case):
    src, inputs, dtype, n, threads, expect = VECTOR_CASES[case]
    got = run(src, inputs, (n,), dtype, (threads, 1, 1), (4, 1, 1))
    want = np.asarray(expect(*inputs.values())).reshape(-1)
    if dtype in (mx.float32, mx.float16):
        np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == mx.float16 else 1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def test_vec_alias_constructor_call():
    src = "uint i = thread_position_in_grid.x; vec<float, 2> v = vec<float, 2>(a[i], 2.0f);" \
          " out[i] = v.x * v.y;"
    a = RNG.standard_normal(4).astype(np.float32)
    got = run(src, {"a": a}, (4,), mx.float32, (4, 1, 1), (4, 1, 1))
    np.testing.assert_allclose(got, 2 * a, rtol=1e-6)


def test_packed_float3_is_12_bytes_and_reads_a_float_buffer():
    src = """
    uint i = thread_position_in_grid.x;
    const device packed_float3* p = (const device packed_float3*)a;
    float3 v = p[i];                     // packed -> aligned vector
    packed_float3 q = v.zxy;
    q += float3(1.0f);
    out[4*i] = q[0]; out[4*i+1] = q.y; out[4*i+2] = q.z;
    out[4*i+3] = float(sizeof(packed_float3) * 100 + sizeof(float3));
    """
    a = RNG.standard_normal(12).astype(np.float32)
    got = run(src, {"a": a}, (16,), mx.float32, (4, 1, 1), (4, 1, 1)).reshape(4, 4)
    np.testing.assert_allclose(got[:, :3], a.reshape(4, 3)[:, [2, 0, 1]] + 1.0, rtol=1e-6)
    np.testing.assert_array_equal(got[:, 3], 1216.0)


def test_as_type_reinterprets_bits():
    src = """
    uint i = thread_position_in_grid.x;
    uint bits = as_type<uint>(a[i]);
    half2 h = as_type<half2>(bits);
    out[3*i] = bits;
    out[3*i+1] = as_type<ushort>(h.x);
    out[3*i+2] = as_type<uint>(as_type<float>(int(bits) ^ int(0x80000000)));
    """
    a = RNG.standard_normal(8).astype(np.float32)
    got = run(src, {"a": a}, (24,), mx.uint32, (8, 1, 1), (8, 1, 1)).reshape(8, 3)
    bits = a.view(np.uint32)
    np.testing.assert_array_equal(got[:, 0], bits)
    np.testing.assert_array_equal(got[:, 1], bits & 0xFFFF)  # little-endian: x is the low half
    np.testing.assert_array_equal(got[:, 2], (-a).view(np.uint32))


def test_scalar_conversions():
    src = """
    uint i = thread_position_in_grid.x;
    float f = a[i];
    out[6*i] = float(int(f));            // truncates toward zero
    out[6*i+1] = float(half(f));
    out[6*i+2] = float(bfloat(f));       // round to nearest even
    out[6*i+3] = float(uint(b[i]) + 1u);
    out[6*i+4] = float(bool(f) + c[i]);  // bool -> int
    out[6*i+5] = static_cast<float>(static_cast<short>(f * 1000.0f));
    """
    a = np.concatenate([RNG.uniform(-40, 40, 7), [0.0]]).astype(np.float32)
    b = RNG.integers(0, 200, 8).astype(np.uint8)
    c = np.array([True, False] * 4)
    got = run(src, {"a": a, "b": b, "c": c}, (48,), mx.float32, (8, 1, 1), (8, 1, 1))
    want = np.stack([np.trunc(a), a.astype(np.float16).astype(np.float32), _bf16_round(a),
                     b + 1.0, (a != 0) + c.astype(np.float32),
                     np.trunc(a * np.float32(1000)).astype(np.int16)], axis=1)
    np.testing.assert_array_equal(got.reshape(8, 6), want)


def test_float_to_bfloat_rounds_the_same_on_every_host():
    """bfloat(x) rounds to nearest even and keeps subnormals wherever the simulator runs: an
    x86 CPU's own bf16 conversion would flush them, and one without it would have the kernel
    call the C runtime (kport/float_calls.h). Expected: torch's conversion."""
    torch = pytest.importorskip("torch")
    ulp = 2.0**-7
    x = np.array([1 + ulp / 2, 1 + 3 * ulp / 2, -(1 + ulp / 2), 1 + ulp / 2 + 2**-20,
                  2**-126, 2**-127, 2**-133, 3 * 2**-134, 2**-134, 2**-149, -(2**-130) * 1.5,
                  3.3895e38, 3.3961e38, 3.4e38, np.inf, -np.inf, 0.0, -0.0, 0.1, -1 / 3],
                 np.float32)
    x = np.concatenate([x, RNG.standard_normal(44).astype(np.float32) * 1e-38])
    src = """
    uint i = thread_position_in_grid.x;
    out[i] = as_type<ushort>(bfloat(a[i]));
    """
    got = run(src, {"a": x}, (x.size,), mx.uint16, (x.size, 1, 1), (32, 1, 1))
    want = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(got, want)
    nan = run(src, {"a": np.array([np.nan, -np.nan], np.float32)}, (2,), mx.uint16,
              (2, 1, 1), (2, 1, 1))
    assert ((nan & 0x7F80) == 0x7F80).all() and (nan & 0x7F).all(), nan  # NaN stays NaN


def test_half_and_bfloat_arithmetic():
    src = """
    uint i = thread_position_in_grid.x;
    half h = x[i] * half(0.5) + half(1.25);
    bfloat b = y[i] * bfloat(4.0f) - bfloat(2.0f);
    out[2*i] = h;
    out[2*i+1] = half(float(b));
    """
    x = RNG.integers(-64, 64, 8).astype(np.float16)  # exact in both types
    y = RNG.integers(-16, 16, 8).astype(np.float32)
    got = run(src, {"x": x, "y": mx.array(y).astype(mx.bfloat16)}, (16,), mx.float16,
              (8, 1, 1), (8, 1, 1))
    want = np.stack([x * np.float16(0.5) + np.float16(1.25), y * 4 - 2], axis=1)
    np.testing.assert_array_equal(got, want.reshape(-1).astype(np.float16))


# ---- matrices -------------------------------------------------------------------------------

LOAD_M = """
float4x4 m = float4x4(float4(a[0], a[1], a[2], a[3]), float4(a[4], a[5], a[6], a[7]),
                      float4(a[8], a[9], a[10], a[11]), float4(a[12], a[13], a[14], a[15]));
"""


def test_float4x4_times_vector_and_column_major_indexing():
    src = LOAD_M + """
    uint i = thread_position_in_grid.x;
    float4 v = float4(x[4*i], x[4*i+1], x[4*i+2], x[4*i+3]);
    float4 r = m * v;
    float4 l = v * m;
    for (int k = 0; k < 4; ++k) { out[12*i+k] = r[k]; out[12*i+4+k] = l[k]; }
    for (int k = 0; k < 4; ++k) out[12*i+8+k] = m[i][k];   // column i, row k
    """
    a = RNG.standard_normal(16).astype(np.float32)
    x = RNG.standard_normal(16).astype(np.float32)
    got = run(src, {"a": a, "x": x}, (48,), mx.float32, (4, 1, 1), (4, 1, 1)).reshape(4, 12)
    m = a.reshape(4, 4).T  # columns are the float4s
    v = x.reshape(4, 4)
    np.testing.assert_allclose(got[:, :4], v @ m.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, 4:8], v @ m, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[:, 8:], a.reshape(4, 4))


def test_half4x4_product_and_transpose():
    src = """
    uint i = thread_position_in_grid.x;
    half4x4 m = half4x4(half4(a[0], a[1], a[2], a[3]), half4(a[4], a[5], a[6], a[7]),
                        half4(a[8], a[9], a[10], a[11]), half4(a[12], a[13], a[14], a[15]));
    half4x4 p = m * transpose(m);
    out[i] = p[i / 4][i % 4];
    """
    a = RNG.integers(-3, 4, 16).astype(np.float16)
    got = run(src, {"a": a}, (16,), mx.float16, (16, 1, 1), (16, 1, 1))
    m = a.astype(np.float32).reshape(4, 4).T
    p = m @ m.T
    np.testing.assert_array_equal(got, p.T.reshape(-1))  # column-major read-out
