"""cuda_sim value types: __half/__half2 and __nv_bfloat16 conversions and arithmetic (rounding
computed here with numpy and from float32 bits), CUDA vector types and vectorised loads."""

from fractions import Fraction

import numpy as np
import pytest

from runners.cuda_sim import RawKernel

F16_CONVERT_CODE = r"""
#include <cuda_fp16.h>
extern "C" __global__ void to_half(const float* x, unsigned short* bits, float* back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half h = __float2half(x[i]);
  __half r = __float2half_rn(x[i]);
  __half c = x[i];  // implicit conversion rounds to nearest too
  bits[3 * i] = __half_as_ushort(h);
  bits[3 * i + 1] = __half_as_ushort(r);
  bits[3 * i + 2] = __half_as_ushort(c);
  back[i] = __half2float(h);
}
"""


def _ties_and_edges_f32() -> np.ndarray:
    ulp = 2.0**-10
    values = [1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 2 + 2**-20, -(1 + 3 * ulp / 2), 2048 + 1,
              2048 + 3, 65504, 65519.99, 65520, 1e6, -1e6, 2**-24, 2**-25, 2**-25 * 1.0001,
              3 * 2**-26, 2**-14, 2**-14 - 2**-25, 0.0, -0.0, np.inf, -np.inf, 0.1, -0.3, 1 / 3]
    return np.array(values, dtype=np.float32)


def test_float_to_half_rounds_to_nearest_even():
    rng = np.random.default_rng(14)
    x = np.concatenate([_ties_and_edges_f32(), rng.normal(0, 1000, 200).astype(np.float32),
                        rng.uniform(-1e-4, 1e-4, 40).astype(np.float32)])
    n = x.size
    bits = np.zeros(3 * n, dtype=np.uint16)
    back = np.zeros(n, dtype=np.float32)
    RawKernel(F16_CONVERT_CODE, "to_half")((2,), (256,), (x, bits, back, np.int32(n)))
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)  # numpy rounds to nearest, ties to even
    for k in range(3):
        np.testing.assert_array_equal(bits[k::3], expected.view(np.uint16))
    np.testing.assert_array_equal(back, expected.astype(np.float32))


def test_float_to_half_nan_stays_nan():
    x = np.array([np.nan, -np.nan, np.float32(np.uint32(0x7F800001).view(np.float32))],
                 dtype=np.float32)
    bits = np.zeros(9, dtype=np.uint16)
    back = np.zeros(3, dtype=np.float32)
    RawKernel(F16_CONVERT_CODE, "to_half")((1,), (3,), (x, bits, back, np.int32(3)))
    assert np.isnan(bits.view(np.float16)).all() and np.isnan(back).all()


def test_every_half_converts_to_float_exactly():
    code = r"""
    #include <cuda_fp16.h>
    extern "C" __global__ void widen(const __half* h, float* out) {
      int base = (blockIdx.x * blockDim.x + threadIdx.x) * 64;
      for (int k = 0; k < 64; ++k) out[base + k] = __half2float(h[base + k]);
    }"""
    h = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    out = np.zeros(2**16, dtype=np.float32)
    RawKernel(code, "widen")((4,), (256,), (h, out))
    expected = h.astype(np.float32)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(out[~nan], expected[~nan])
    assert np.isnan(out[nan]).all()


HALF_MATH_CODE = r"""
#include <cuda_fp16.h>
extern "C" __global__ void half_math(const __half* a, const __half* b, const __half* c,
                                     __half* out) {
  int i = threadIdx.x;
  __half x = a[i], y = b[i], z = c[i];
  __half* o = out + 8 * i;
  o[0] = __hadd(x, y);
  o[1] = __hsub(x, y);
  o[2] = __hmul(x, y);
  o[3] = __hdiv(x, y);
  o[4] = __hfma(x, y, z);
  o[5] = x * y + z;  // operators: two roundings
  o[6] = __hneg(x);
  o[7] = __hmax(x, y);
}
"""


def test_half_arithmetic_rounds_like_numpy_float16():
    rng = np.random.default_rng(15)
    n = 64
    # Multiples of 1/64 up to 4: products and sums are exact in float64 before the final rounding.
    a, b, c = (rng.integers(-256, 257, n) / 64 for _ in range(3))
    b[b == 0] = 0.25
    a, b, c = (v.astype(np.float16) for v in (a, b, c))
    out = np.zeros(8 * n, dtype=np.float16)
    RawKernel(HALF_MATH_CODE, "half_math")((1,), (n,), (a, b, c, out))
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    expected = np.stack([a + b, a - b, a * b, (a64 / b64).astype(np.float16),
                         (a64 * b64 + c64).astype(np.float16), (a * b) + c, -a,
                         np.maximum(a, b)], axis=1)
    np.testing.assert_array_equal(out.reshape(n, 8).view(np.uint16), expected.view(np.uint16))


def test_half2_pairs():
    code = r"""
    #include <cuda_fp16.h>
    extern "C" __global__ void pairs(const float* x, float* out) {
      int i = threadIdx.x;
      __half2 p = __floats2half2_rn(x[2 * i], x[2 * i + 1]);
      __half2 q = __halves2half2(__float2half(1.5f), __float2half(-0.25f));
      __half2 s = __hadd2(p, q), m = __hmul2(p, q), f = __hfma2(p, q, p);
      float2 sf = __half22float2(s);
      out[6 * i] = sf.x;
      out[6 * i + 1] = sf.y;
      out[6 * i + 2] = __low2float(m);
      out[6 * i + 3] = __high2float(m);
      out[6 * i + 4] = __low2float(f);
      out[6 * i + 5] = __high2float(__lowhigh2highlow(f));
    }"""
    rng = np.random.default_rng(16)
    x = (rng.integers(-2000, 2000, 64) / 16).astype(np.float32)
    out = np.zeros(6 * 32, dtype=np.float32)
    RawKernel(code, "pairs")((1,), (32,), (x, out))
    p = x.astype(np.float16).reshape(32, 2)
    q = np.array([1.5, -0.25], dtype=np.float16)
    s, m = p + q, p * q
    f = (p.astype(np.float64) * q + p).astype(np.float16)
    expected = np.stack([s[:, 0], s[:, 1], m[:, 0], m[:, 1], f[:, 0], f[:, 0]], axis=1)
    np.testing.assert_array_equal(out.reshape(32, 6), expected.astype(np.float32))


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even on the dropped 16 bits (NaN kept NaN)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def _bf16_to_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


BF16_CODE = r"""
#include <cuda_bf16.h>
extern "C" __global__ void bf16(const float* x, const float* y, unsigned short* bits,
                                float* back) {
  int i = threadIdx.x;
  __nv_bfloat16 a = __float2bfloat16(x[i]), b = __float2bfloat16_rn(y[i]);
  bits[4 * i] = __bfloat16_as_ushort(a);
  bits[4 * i + 1] = __bfloat16_as_ushort(__hadd(a, b));
  bits[4 * i + 2] = __bfloat16_as_ushort(a * b);
  bits[4 * i + 3] = __bfloat16_as_ushort(__nv_bfloat16(x[i]) - b);
  back[i] = __bfloat162float(a);
}
"""


def test_bfloat16_conversion_and_arithmetic():
    tie_bits = [0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0x00008000, 0x80018000,
                0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x3F7FFFFF, 0x4049FFFF]
    rng = np.random.default_rng(17)
    x = np.concatenate([np.array(tie_bits, dtype=np.uint32).view(np.float32),
                        rng.uniform(0.5, 64, 52).astype(np.float32)])
    y = rng.uniform(0.5, 64, 64).astype(np.float32)
    bits = np.zeros(4 * 64, dtype=np.uint16)
    back = np.zeros(64, dtype=np.float32)
    RawKernel(BF16_CODE, "bf16")((1,), (64,), (x, y, bits, back))
    bits = bits.reshape(64, 4)
    a, b = _bf16_bits(x), _bf16_bits(y)
    fa, fb = _bf16_to_float(a), _bf16_to_float(b)
    np.testing.assert_array_equal(bits[:, 0], a)
    np.testing.assert_array_equal(back, fa)
    # Arithmetic on the random part only: for bf16 inputs in [0.5, 64] the float32 sum,
    # difference and product are exact, so one bf16 rounding of them is the exact result.
    r = slice(len(tie_bits), None)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(bits[r, 1], _bf16_bits(fa[r] + fb[r]))
        np.testing.assert_array_equal(bits[r, 2], _bf16_bits(fa[r] * fb[r]))
        np.testing.assert_array_equal(bits[r, 3], _bf16_bits(fa[r] - fb[r]))


def test_bfloat16_nan_and_half_bfloat16_interconversion():
    code = r"""
    #include <cuda_fp16.h>
    #include <cuda_bf16.h>
    extern "C" __global__ void cross(const float* x, unsigned short* out) {
      int i = threadIdx.x;
      __nv_bfloat16 b = __float2bfloat16(x[i]);
      out[2 * i] = __bfloat16_as_ushort(b);
      out[2 * i + 1] = __half_as_ushort(__float2half(__bfloat162float(b)));
    }"""
    x = np.array([np.nan, 1.0, 3.140625, -2.5, 70000.0, 1e-9], dtype=np.float32)
    out = np.zeros(12, dtype=np.uint16)
    RawKernel(code, "cross")((1,), (6,), (x, out))
    out = out.reshape(6, 2)
    b = _bf16_bits(x[1:])
    assert np.isnan(_bf16_to_float(out[:1, 0])).all()
    np.testing.assert_array_equal(out[1:, 0], b)
    with np.errstate(over="ignore"):
        as_half = _bf16_to_float(b).astype(np.float16)
    np.testing.assert_array_equal(out[1:, 1], as_half.view(np.uint16))


VECTOR_CODE = r"""
extern "C" __global__ void vectors(const float* x, const int* k, float* out2, int4* out4,
                                   int* sizes) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 v = reinterpret_cast<const float4*>(x)[i];
  float2 p = make_float2(v.x + v.y, v.z * v.w);
  reinterpret_cast<float2*>(out2)[i] = p;
  int4 q = reinterpret_cast<const int4*>(k)[i];
  out4[i] = make_int4(q.w, q.z, q.y + q.x, (int)v.x);
  if (i == 0) {
    sizes[0] = sizeof(float2); sizes[1] = alignof(float2);
    sizes[2] = sizeof(float4); sizes[3] = alignof(float4);
    sizes[4] = sizeof(float3); sizes[5] = alignof(float3);
    sizes[6] = sizeof(int4);   sizes[7] = sizeof(double2);
    sizes[8] = alignof(double2); sizes[9] = sizeof(uchar4);
    dim3 d(4, 2);
    sizes[10] = d.x * 100 + d.y * 10 + d.z;
  }
}
"""


@pytest.mark.parametrize("n", [4, 96])
def test_vector_types_and_vectorised_loads(n):
    rng = np.random.default_rng(n)
    x = rng.integers(-100, 100, 4 * n).astype(np.float32)
    k = rng.integers(-1000, 1000, 4 * n, dtype=np.int32)
    out2 = np.zeros(2 * n, dtype=np.float32)
    out4 = np.zeros(4 * n, dtype=np.int32)
    sizes = np.zeros(11, dtype=np.int32)
    block = min(n, 32)
    RawKernel(VECTOR_CODE, "vectors")((n // block,), (block,), (x, k, out2, out4, sizes))
    v, q = x.reshape(n, 4), k.reshape(n, 4)
    np.testing.assert_array_equal(out2.reshape(n, 2),
                                  np.stack([v[:, 0] + v[:, 1], v[:, 2] * v[:, 3]], axis=1))
    np.testing.assert_array_equal(out4.reshape(n, 4),
                                  np.stack([q[:, 3], q[:, 2], q[:, 1] + q[:, 0],
                                            v[:, 0].astype(np.int32)], axis=1))
    # Sizes and alignments from the CUDA programming guide's vector type table.
    np.testing.assert_array_equal(sizes, [8, 8, 16, 16, 12, 4, 16, 16, 16, 4, 421])


def test_misaligned_float4_load_is_reported():
    code = r"""
    extern "C" __global__ void skew(const float* x, float* out) {
      float4 v = *reinterpret_cast<const float4*>(x + 1);
      out[0] = v.x + v.y + v.z + v.w;
    }"""
    run = RawKernel(code, "skew").launch((1,), (1,), (np.zeros(8, np.float32),
                                                     np.zeros(1, np.float32)))
    assert run.compiled
    assert not run.ok and any(f.line == 3 for f in run.findings)


DOUBLE_TO_BF16 = r"""
extern "C" __global__ void narrow(const double* x, unsigned short* bits, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) bits[i] = __builtin_bit_cast(unsigned short, (__bf16)x[i]);
}
"""


# Every finite non-negative bfloat16 as a double (exact), in bit order, then 2^128 (infinity).
_BF16_MAGNITUDES = np.append((np.arange(0x7F80, dtype=np.uint32) << 16).view(np.float32)
                             .astype(np.float64), 2.0**128)


def _bf16_nearest_even(d: float) -> int:
    """The bfloat16 nearest ``d`` (ties to an even last bit): its two neighbours found among
    every finite bfloat16 of its sign, their distances compared exactly."""
    sign = 0x8000 if np.signbit(d) else 0
    target = abs(Fraction(d))
    k = int(np.searchsorted(_BF16_MAGNITUDES, abs(d), side="right")) - 1  # largest <= |d|
    if k == len(_BF16_MAGNITUDES) - 1 or Fraction(_BF16_MAGNITUDES[k]) == target:
        return sign | k
    below = target - Fraction(_BF16_MAGNITUDES[k])
    above = Fraction(_BF16_MAGNITUDES[k + 1]) - target
    return sign | (k if below < above or (below == above and k % 2 == 0) else k + 1)


def test_double_to_bf16_rounds_once():
    """A double narrowed to __bf16 is rounded once, not through float's rounding first
    (kport/float_calls.h: round to odd, then to nearest even)."""
    one = 2.0**-7
    x = np.array([1 + one / 2 + 2.0**-40, 1 + one / 2, 1 + one / 2 - 2.0**-40,
                  1 + one / 2 + 2.0**-30, -(1 + 3 * one / 2), 1e-40, 2.0**-134, 2.0**-140,
                  3.3961e38, 3.3962e38, 1e300, -1e300, 1e-300, 0.1, -1 / 3, 0.0],
                 np.float64)
    bits = np.zeros(x.size, np.uint16)
    RawKernel(DOUBLE_TO_BF16, "narrow")((1,), (32,), (x, bits, np.int32(x.size)))
    np.testing.assert_array_equal(bits, [_bf16_nearest_even(float(v)) for v in x])
