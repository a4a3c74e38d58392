"""cuda_sim integer and float intrinsics against references computed here from the CUDA Math API
and PTX definitions (bit counting, byte permute, fast math, saturation, rounding conversions)."""

from fractions import Fraction

import numpy as np

from runners.cuda_sim import RawKernel

BITS_CODE = r"""
extern "C" __global__ void bits(const unsigned* x, const unsigned* y, const unsigned* s,
                                int* out, unsigned* rev, unsigned* perm) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned v = x[i];
  out[3 * i] = __popc(v);
  out[3 * i + 1] = __clz((int)v);
  out[3 * i + 2] = __ffs((int)v);
  rev[i] = __brev(v);
  perm[i] = __byte_perm(v, y[i], s[i]);
}
"""

EDGE_WORDS = [0, 1, 2, 3, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFF, 0x00010000, 0xDEADBEEF, 0x12345678]


def _byte_perm(x: int, y: int, s: int) -> int:
    """PTX prmt (default mode): nibble n of s picks byte sel&7 of {y,x}; bit 3 replicates its
    sign bit."""
    source = (y << 32) | x
    result = 0
    for n in range(4):
        sel = (s >> (4 * n)) & 0xF
        byte = (source >> (8 * (sel & 7))) & 0xFF
        if sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        result |= byte << (8 * n)
    return result


def test_popc_clz_ffs_brev_byte_perm():
    rng = np.random.default_rng(6)
    n = 64
    x = np.concatenate([EDGE_WORDS, rng.integers(0, 2**32, n - len(EDGE_WORDS))]).astype(np.uint32)
    y = np.concatenate([np.zeros(4), rng.integers(0, 2**32, n - 4)]).astype(np.uint32)
    selectors = [0x3210, 0x7654, 0x0000, 0x4321, 0x5140, 0x7777]
    s = np.concatenate([selectors, rng.integers(0, 0x8000, n - len(selectors))]).astype(np.uint32)
    s[-4:] = [0x8888, 0xB9AC, 0x0F0F, 0x1F3E]  # sign-replicating selectors (PTX bit 3)
    out = np.zeros(3 * n, dtype=np.int32)
    rev = np.zeros(n, dtype=np.uint32)
    perm = np.zeros(n, dtype=np.uint32)
    RawKernel(BITS_CODE, "bits")((2,), (32,), (x, y, s, out, rev, perm))
    words = [int(v) for v in x]
    expected = [(bin(v).count("1"), 32 - v.bit_length(), (v & -v).bit_length()) for v in words]
    np.testing.assert_array_equal(out.reshape(n, 3), np.array(expected))
    np.testing.assert_array_equal(rev, [int(f"{v:032b}"[::-1], 2) for v in words])
    np.testing.assert_array_equal(perm, [_byte_perm(a, int(b), int(c))
                                         for a, b, c in zip(words, y, s, strict=True)])


def test_64_bit_bit_counting():
    code = r"""
    extern "C" __global__ void bits64(const unsigned long long* x, int* out,
                                      unsigned long long* rev) {
      int i = threadIdx.x;
      unsigned long long v = x[i];
      out[3 * i] = __popcll(v);
      out[3 * i + 1] = __clzll((long long)v);
      out[3 * i + 2] = __ffsll((long long)v);
      rev[i] = __brevll(v);
    }"""
    rng = np.random.default_rng(7)
    edges = np.array([0, 1, 2**63, 2**64 - 1, 2**32], dtype=np.uint64)
    x = np.concatenate([edges, rng.integers(0, 2**64, 27, dtype=np.uint64)])
    out = np.zeros(96, dtype=np.int32)
    rev = np.zeros(32, dtype=np.uint64)
    RawKernel(code, "bits64")((1,), (32,), (x, out, rev))
    words = [int(v) for v in x]
    expected = [(bin(v).count("1"), 64 - v.bit_length(), (v & -v).bit_length()) for v in words]
    np.testing.assert_array_equal(out.reshape(32, 3), np.array(expected))
    np.testing.assert_array_equal(rev, np.array([int(f"{v:064b}"[::-1], 2) for v in words],
                                                dtype=np.uint64))


FLOAT_CODE = r"""
extern "C" __global__ void fast(const float* x, const float* y, float* out) {
  int i = threadIdx.x;
  float a = x[i], b = y[i];
  out[6 * i] = __expf(a);
  out[6 * i + 1] = __logf(b);
  out[6 * i + 2] = __fdividef(a, b);
  out[6 * i + 3] = rsqrtf(b);
  out[6 * i + 4] = __saturatef(a);
  out[6 * i + 5] = __ldg(&x[i]) + __ldg(&y[i]);
}
"""


def test_fast_math_intrinsics_within_documented_error():
    rng = np.random.default_rng(8)
    x = rng.uniform(-10, 10, 64).astype(np.float32)
    y = rng.uniform(0.01, 100, 64).astype(np.float32)
    out = np.zeros(6 * 64, dtype=np.float32)
    RawKernel(FLOAT_CODE, "fast")((1,), (64,), (x, y, out))
    out = out.reshape(64, 6)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    # CUDA Math API, table of intrinsic errors: __expf 2 + floor(|1.173 x|) ulp, __logf 3 ulp
    # outside [0.5, 2], __fdividef 2 ulp, rsqrtf 2 ulp.
    np.testing.assert_allclose(out[:, 0], np.exp(x64), rtol=(3 + 1.173 * 10) * 2**-23)
    np.testing.assert_allclose(out[:, 1], np.log(y64), rtol=4 * 2**-23, atol=2**-21)
    np.testing.assert_allclose(out[:, 2], x64 / y64, rtol=3 * 2**-23)
    np.testing.assert_allclose(out[:, 3], 1 / np.sqrt(y64), rtol=3 * 2**-23)
    np.testing.assert_array_equal(out[:, 4], np.clip(x, 0, 1))
    np.testing.assert_array_equal(out[:, 5], x + y)


def test_special_values_of_float_intrinsics():
    nan, inf = np.float32("nan"), np.float32("inf")
    x = np.array([nan, -0.5, 0.5, 2.0, inf, -inf, 1.0, 0.0, 7.0, inf, -3.0, 1.0], np.float32)
    y = np.array([1.0, 0.0, 4.0, inf, 1.0, 1.0, 1e38, 2.0, -2.5e38, 1e38, 2.0, -1.0], np.float32)
    out = np.zeros(6 * 12, dtype=np.float32)
    RawKernel(FLOAT_CODE, "fast")((1,), (12,), (x, y, out))
    out = out.reshape(12, 6)
    # __saturatef: NaN -> 0, clamp to [0, 1].
    np.testing.assert_array_equal(out[:, 4], [0, 0, 0.5, 1, 1, 0, 1, 0, 1, 1, 0, 1])
    # rsqrtf: +0 -> +inf, +inf -> +0, negative -> NaN.
    assert out[1, 3] == inf and out[3, 3] == 0 and np.isnan(out[11, 3])
    # __fdividef: 0 for 2^126 < |y| < 2^128, NaN when x is then infinite.
    assert out[6, 2] == 0 and out[8, 2] == 0 and np.isnan(out[9, 2])
    assert out[2, 2] == np.float32(0.125) and out[10, 2] == -1.5
    assert out[7, 0] == 1 and out[0, 1] == 0 and out[3, 1] == inf


def _nearest_float32(exact: Fraction) -> np.float32:
    """Round an exact rational to float32, ties to even (normal range)."""
    guess = np.float32(float(exact))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess,
                  np.nextafter(guess, np.float32(np.inf))]
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact),
                                          int(np.array(c).view(np.uint32)) & 1))
    return np.float32(best)


def test_fmaf_rounds_once():
    code = r"""
    extern "C" __global__ void fused(const float* a, const float* b, const float* c, float* out) {
      int i = threadIdx.x;
      out[i] = fmaf(a[i], b[i], c[i]);
    }"""
    rng = np.random.default_rng(9)
    e = np.float32(2**-13)
    a = np.concatenate([[1 + e, 1 + e], rng.uniform(-4, 4, 30)]).astype(np.float32)
    b = np.concatenate([[1 + e, 1 - e], rng.uniform(-4, 4, 30)]).astype(np.float32)
    c = np.concatenate([[-1, -1], rng.uniform(-4, 4, 30)]).astype(np.float32)
    out = np.zeros(32, dtype=np.float32)
    RawKernel(code, "fused")((1,), (32,), (a, b, c, out))
    expected = [_nearest_float32(Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)))
                for p, q, r in zip(a, b, c, strict=True)]
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))
    assert out[0] == np.float32(2**-12 + 2**-26)  # a separate multiply would round this away


CONVERT_CODE = r"""
extern "C" __global__ void to_int(const float* x, int* out, int* bits, float* back) {
  int i = threadIdx.x;
  out[4 * i] = __float2int_rn(x[i]);
  out[4 * i + 1] = __float2int_rz(x[i]);
  out[4 * i + 2] = __float2int_rd(x[i]);
  out[4 * i + 3] = __float2int_ru(x[i]);
  bits[i] = __float_as_int(x[i]);
  back[i] = __int_as_float(bits[i] ^ 0x80000000);
}
"""


def test_float_to_int_rounding_modes_saturation_and_nan():
    values = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7, -2.7, 0.0, -0.0, 1e10, -1e10, np.inf,
              -np.inf, np.nan, 2147483520.0, 2**31, -(2**31), -2147483904.0, 3.999999, -1e-30,
              1e-30, 8388609.5, 123456.5]
    x = np.array(values, dtype=np.float32)
    n = len(x)
    out = np.zeros(4 * n, dtype=np.int32)
    bits = np.zeros(n, dtype=np.int32)
    back = np.zeros(n, dtype=np.float32)
    RawKernel(CONVERT_CODE, "to_int")((1,), (n,), (x, out, bits, back))
    lo, hi = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    x64 = x.astype(np.float64)
    modes = [np.rint(x64), np.trunc(x64), np.floor(x64), np.ceil(x64)]  # rint: ties to even
    expected = np.stack([np.where(np.isnan(m), 0, np.clip(np.nan_to_num(m), lo, hi))
                         for m in modes], axis=1).astype(np.int32)
    np.testing.assert_array_equal(out.reshape(n, 4), expected)
    np.testing.assert_array_equal(bits, x.view(np.int32))
    np.testing.assert_array_equal(back.view(np.uint32), x.view(np.uint32) ^ np.uint32(0x80000000))
