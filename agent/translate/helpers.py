"""The Metal helper functions some mappings need, emitted into a port's header only when the
translation uses them (agent/translate/emit.py adds a name to ``Context.helpers`` when a
rewrite's ``to`` or a mapping names it)."""

from __future__ import annotations

from kb.concepts import metal_library

# Header helpers some mappings need. CUDA's atomicCAS is strong; Metal has only the weak form,
# which may fail spuriously and leave `expected` equal to cmp: retry exactly then.
HELPERS = {"kport_atomic_cas": """template <typename P, typename T>
inline T kport_atomic_cas(P p, T cmp, T val) {
  T expected = cmp;
  while (!atomic_compare_exchange_weak_explicit(p, &expected, val, memory_order_relaxed,
                                                memory_order_relaxed) && expected == cmp) {
  }
  return expected;
}"""}
# N elements of any pointer's memory as one vector: an MLX input of fewer than 8 elements is
# `const constant T*`, where a cast to a `const device` vector pointer does not compile.
HELPERS["kport_vload"] = """// N elements from p as one vector V (p: any address space)
template <typename V, int N, typename P>
inline V kport_vload(P p, long i) {
  V v;
  for (int k = 0; k < N; ++k) v[k] = p[N * i + k];
  return v;
}"""
# erf, which MSL lacks (cuda-to-metal.md: "Not in MSL and not in the prelude"): the Maclaurin
# series 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)) for |x| < 2, else 1 - erfc(x) with erfc
# from its continued fraction (40 terms). Evaluated in float: max absolute error 7e-7 on
# [-7, 7] against math.erf (about 10 ulp near 1; CUDA's erff is within 2 ulp).
HELPERS["kport_erf"] = """inline float kport_erf(float x) {
  float a = fabs(x);
  if (a < 2.0f) {
    float term = a, sum = a, x2 = a * a;
    for (int n = 1; n < 60; ++n) {
      term *= -x2 / n;
      float add = term / (2 * n + 1);
      sum += add;
      if (fabs(add) < 1e-9f * fabs(sum)) break;
    }
    return copysign(min(1.0f, 1.1283791670955126f * sum), x);
  }
  if (a > 6.0f) return copysign(1.0f, x);
  // erfc(a) = exp(-a^2) / sqrt(pi) * 1 / (a + 1/2 / (a + 1 / (a + 3/2 / (a + 2 / (a + ...)))))
  float f = a;
  for (int k = 40; k >= 1; --k) f = a + (k * 0.5f) / f;
  return copysign(1.0f - exp(-a * a) / (1.7724538509055159f * f), x);
}"""
# min/max over the type C++'s arithmetic conversions give (math.min_max)
HELPERS["kport_min"] = """template <typename A, typename B>
inline auto kport_min(A a, B b) {
  using C = decltype(a + b);
  return min(C(a), C(b));
}"""
HELPERS["kport_max"] = """template <typename A, typename B>
inline auto kport_max(A a, B b) {
  using C = decltype(a + b);
  return max(C(a), C(b));
}"""
# __shfl_up_sync / __shfl_down_sync with a width (warp.shfl_up_width, warp.shfl_down_width):
# the own value where CUDA's source lane would leave the caller's w-lane segment
HELPERS["kport_shfl_up_w"] = """template <typename T>
inline T kport_shfl_up_w(T v, ushort d, ushort w, ushort lane) {
  T r = simd_shuffle_up(v, d);
  return (lane & (w - 1)) < d ? v : r;
}"""
HELPERS["kport_shfl_down_w"] = """template <typename T>
inline T kport_shfl_down_w(T v, ushort d, ushort w, ushort lane) {
  T r = simd_shuffle_down(v, d);
  return ((lane & (w - 1)) + d >= w) ? v : r;
}"""
# CUB's block and warp collectives (agent/translate/cub.py maps cub:: onto them)
HELPERS["kport_cub"] = metal_library("kport_cub")
# PyTorch's c10::complex (a host library's type) with its layout and arithmetic (rewrites.toml's
# [[scoped]] c10::complex)
HELPERS["kport_c10"] = metal_library("kport_c10")
# wmma fragments as 8x8 simdgroup_matrix tiles (agent/translate/wmma.py maps wmma:: onto it)
HELPERS["kport_wmma"] = metal_library("kport_wmma")
