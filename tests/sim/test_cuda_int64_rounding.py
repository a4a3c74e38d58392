"""64-bit integer -> float/double conversions in every rounding mode (__ll2float_rz,
__ull2double_ru, ...) in cuda_sim: correctly rounded at the edges (2^63 - 1, -2^63, 2^64 - 1,
2^53 + 1), and built without the compiler runtime (kernels link against none: an `__int128`
<-> double conversion once left `__fixdfti` undefined and no kernel using them could load)."""

from fractions import Fraction

import numpy as np

from runners.cuda_sim import RawKernel

KERNEL = r"""
extern "C" __global__ void k(const long long* x, const unsigned long long* u, float* f,
                             double* d) {
  int i = threadIdx.x;
  f[4 * i + 0] = __ll2float_rz(x[i]);   f[4 * i + 1] = __ll2float_ru(x[i]);
  f[4 * i + 2] = __ull2float_rd(u[i]);  f[4 * i + 3] = __ull2float_ru(u[i]);
  d[4 * i + 0] = __ll2double_rz(x[i]);  d[4 * i + 1] = __ll2double_ru(x[i]);
  d[4 * i + 2] = __ull2double_rd(u[i]); d[4 * i + 3] = __ull2double_ru(u[i]);
}"""


def _rounded(v: int, mode: str, kind) -> float:
    """``v`` rounded to ``kind`` toward zero (rz), up (ru) or down (rd), exactly."""
    want = Fraction(v)
    c = kind(float(v))
    step = {"ru": np.inf, "rd": -np.inf, "rz": 0.0}[mode]
    while True:  # move to the first representable value on the mode's side of v
        here = Fraction(float(c))
        if mode == "ru" and here < want or mode == "rd" and here > want or \
                mode == "rz" and abs(here) > abs(want):
            c = np.nextafter(c, kind(step))
            continue
        back = np.nextafter(c, kind(-step if mode != "rz" else (np.inf if v < 0 else -np.inf)))
        there = Fraction(float(back))
        if mode == "ru" and there >= want or mode == "rd" and there <= want:
            c = back
            continue
        return float(c)


def test_directed_rounding_of_64_bit_integers_at_the_edges():
    x = np.array([2**63 - 1, -2**63, 123456789012345678, -987654321987654321, 2**53 + 1,
                  -(2**53 + 1), 7, 0], np.int64)
    u = np.array([2**64 - 1, 2**63 + 1, 18446744073709551557, 2**53 + 3, 1, 0, 2**62 + 12345,
                  99], np.uint64)
    f, d = np.zeros(32, np.float32), np.zeros(32, np.float64)
    run = RawKernel(KERNEL, "k").launch((1,), (8,), [x, u, f, d])
    assert run.ok, run.diagnostics
    for i in range(8):
        for j, (v, mode) in enumerate(((int(x[i]), "rz"), (int(x[i]), "ru"), (int(u[i]), "rd"),
                                       (int(u[i]), "ru"))):
            assert f[4 * i + j] == _rounded(v, mode, np.float32), (i, j, v, mode)
            assert d[4 * i + j] == _rounded(v, mode, np.float64), (i, j, v, mode)
