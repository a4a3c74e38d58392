"""The Metal conformance cases: `metal_kernel` bodies every Metal runner must run alike.

Each case carries what ``metal_kernel(...)`` and its launch take, an input maker and an
independent numpy reference. tests/conformance runs them through metal_sim everywhere and
through mlx_metal on Apple Silicon, so a disagreement there is a simulator bug to fix.
Sources stay within what MLX 0.32 compiles on a Mac: fixed-size threadgroup arrays, template
arguments for sizes, no dynamic threadgroup memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mlx.core as mx
import numpy as np

from evals.conformance import _gelu, _softmax  # shared numpy references

if TYPE_CHECKING:
    from runners.base import LaunchRecord, Runner


@dataclass(frozen=True)
class MetalCase:
    name: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    source: str
    grid: tuple[int, int, int]  # in threads, as MLX counts
    threadgroup: tuple[int, int, int]
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[mx.Dtype, ...]
    make: Callable[[np.random.Generator], list]  # kernel inputs: mx.array or Python scalars
    expect: Callable[[list], list[np.ndarray]]  # reference outputs from numpy inputs
    header: str = ""
    template: tuple[tuple[str, object], ...] = ()
    ensure_row_contiguous: bool = True
    atomic_outputs: bool = False
    init_value: float | None = None
    rtol: float = 1e-5
    atol: float = 1e-6

    def expected(self, inputs: list) -> list[np.ndarray]:
        """The reference outputs for the inputs a run was given."""
        return self.expect([to_numpy(x) for x in inputs])


def to_numpy(value):
    """An mx.array as numpy (bfloat16 widened to float32, which holds it exactly); scalars
    pass through."""
    if not isinstance(value, mx.array):
        return value
    if value.dtype == mx.bfloat16:
        value = value.astype(mx.float32)
    return np.array(value)


def _normal(rng, *shape, dtype=mx.float32):
    return mx.array(rng.standard_normal(shape).astype(np.float32)).astype(dtype)


def _bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even) and back."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def _scale_shift(a):
    return a[0] * np.resize(a[1], a[0].size).astype(np.float32) + np.float32(1)


def _segments(a: np.ndarray, size: int, fn) -> np.ndarray:
    """``fn`` applied to consecutive chunks of ``size`` (the last may be short)."""
    return np.concatenate([fn(a[i:i + size]) for i in range(0, a.size, size)])




def _edge_sizes(rows: int, cols: int, tg: tuple[int, int]) -> np.ndarray:
    """threads_per_threadgroup.x * 1000 + .y per element: edge groups are non-uniform."""
    tx = np.where(np.arange(cols) >= cols - cols % tg[0], cols % tg[0], tg[0])
    ty = np.where(np.arange(rows) >= rows - rows % tg[1], rows % tg[1], tg[1])
    return (tx[None, :] * 1000 + ty[:, None]).astype(np.uint32)


ELEMENTWISE_2D = """
uint2 p = thread_position_in_grid.xy;
uint i = p.y * 45 + p.x;  // no bounds check: MLX never launches threads outside the grid
y[i] = fma(x[i], x[i], 1.0f);
sizes[i] = threads_per_threadgroup.x * 1000 + threads_per_threadgroup.y;
"""

GELU_HALF = """
uint i = thread_position_in_grid.x;
float v = float(x[i]);
float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
y[i] = static_cast<float16_t>(0.5f * v * (1.0f + tanh(inner)));
"""

BF16_MIXED = """
uint i = thread_position_in_grid.x;
float v = float(x[i]) * float(w[i % 64]) + 1.0f;
y[i] = static_cast<bfloat16_t>(v);
h[i] = static_cast<float16_t>(v);
"""

ROW_SUM = """
// one threadgroup of 4 SIMD-groups per row
threadgroup float partial[4];
uint row = threadgroup_position_in_grid.y;
uint t = thread_position_in_threadgroup.x;
uint cols = x_shape[1];
float acc = 0.0f;
for (uint c = t; c < cols; c += 128) acc += x[row * cols + c];
acc = simd_sum(acc);
if (thread_index_in_simdgroup == 0) partial[simdgroup_index_in_threadgroup] = acc;
threadgroup_barrier(mem_flags::mem_threadgroup);
if (simdgroup_index_in_threadgroup == 0) {
  float s = thread_index_in_simdgroup < 4 ? partial[thread_index_in_simdgroup] : 0.0f;
  s = simd_sum(s);
  if (thread_index_in_simdgroup == 0) out[row] = s;
}
"""

BLOCK_SCAN = """
// exclusive scan over each threadgroup; the last group is short (a partial SIMD-group)
threadgroup int totals[4];
uint i = thread_position_in_grid.x;
uint sg = simdgroup_index_in_threadgroup;
int v = x[i];
int prefix = simd_prefix_exclusive_sum(v);
int total = simd_sum(v);
if (thread_index_in_simdgroup == 0) totals[sg] = total;
threadgroup_barrier(mem_flags::mem_threadgroup);
for (uint s = 0; s < sg; ++s) prefix += totals[s];
out[i] = prefix;
"""

BUTTERFLY = """
uint i = thread_position_in_grid.x;
float v = x[i];
float m = v;
for (ushort o = 16; o > 0; o >>= 1) m = max(m, simd_shuffle_xor(m, o));
row_max[i] = m;
swapped[i] = simd_shuffle_xor(v, ushort(5));
"""

SOFTMAX = """
// one threadgroup of 4 SIMD-groups per row
threadgroup float red[4];
uint row = threadgroup_position_in_grid.y, t = thread_position_in_threadgroup.x;
uint lane = thread_index_in_simdgroup, sg = simdgroup_index_in_threadgroup;
uint n = x_shape[1];
const device float* r = x + row * n;
float m = -INFINITY;
for (uint c = t; c < n; c += 128) m = max(m, r[c]);
m = simd_max(m);
if (lane == 0) red[sg] = m;
threadgroup_barrier(mem_flags::mem_threadgroup);
m = max(max(red[0], red[1]), max(red[2], red[3]));
threadgroup_barrier(mem_flags::mem_threadgroup);  // everyone has read red before reuse
float s = 0.0f;
for (uint c = t; c < n; c += 128) s += exp(r[c] - m);
s = simd_sum(s);
if (lane == 0) red[sg] = s;
threadgroup_barrier(mem_flags::mem_threadgroup);
s = red[0] + red[1] + red[2] + red[3];
for (uint c = t; c < n; c += 128) y[row * n + c] = exp(r[c] - m) / s;
"""

TILED_MATMUL = """
// the grid is padded to whole tiles so every thread reaches both barriers
threadgroup float As[TILE][TILE];
threadgroup float Bs[TILE][TILE];
uint2 tid = thread_position_in_threadgroup.xy;
uint row = thread_position_in_grid.y, col = thread_position_in_grid.x;
uint M = a_shape[0], K = a_shape[1], N = b_shape[1];
float acc = 0.0f;
for (uint k0 = 0; k0 < K; k0 += TILE) {
  As[tid.y][tid.x] = (row < M && k0 + tid.x < K) ? a[row * K + k0 + tid.x] : 0.0f;
  Bs[tid.y][tid.x] = (col < N && k0 + tid.y < K) ? b[(k0 + tid.y) * N + col] : 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = 0; k < TILE; ++k) acc = fma(As[tid.y][k], Bs[k][tid.x], acc);
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (row < M && col < N) c[row * N + col] = acc;
"""

SIMDGROUP_MATMUL = """
// (16x32) @ (32x16): each of 4 SIMD-groups owns one 8x8 tile of the product
uint sg = simdgroup_index_in_threadgroup;
uint col0 = (sg % 2) * 8, row0 = (sg / 2) * 8;  // origins are ulong2(column, row)
simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
simdgroup_float8x8 ma, mb;
for (uint k = 0; k < 32; k += 8) {
  simdgroup_load(ma, a, 32, ulong2(k, row0));
  simdgroup_load(mb, b, 16, ulong2(col0, k));
  simdgroup_multiply_accumulate(acc, ma, mb, acc);
}
simdgroup_store(acc, c, 16, ulong2(col0, row0));
"""

ATOMIC_HIST = """
uint i = thread_position_in_grid.x;
uint bin = uint(x[i]) & 15;
atomic_fetch_add_explicit(&bins[bin], 1u, memory_order_relaxed);
atomic_fetch_add_explicit(&total[0], float(bin), memory_order_relaxed);
"""

TEMPLATE_TYPES = """
uint base = thread_position_in_grid.x * N;
for (int k = 0; k < N; ++k) {
  T v = x[base + k];
  y[base + k] = NEGATE ? T(-v * v) : T(v * v);
}
"""

STRIDED_GATHER = """
// any layout: walk the logical index through x's own shape and strides
uint i = thread_position_in_grid.x;
int64_t loc = 0;
uint rem = i;
for (int d = x_ndim - 1; d >= 0; --d) {
  uint extent = uint(x_shape[d]);
  loc += int64_t(rem % extent) * x_strides[d];
  rem /= extent;
}
y[i] = x[loc] * 2.0f;
"""

SCALAR_INPUTS = """
uint i = thread_position_in_grid.x;
if (i >= uint(n)) return;  // the grid is padded to whole threadgroups
out[i] = alpha * x[i] + y[i];
"""

F32, F16, BF16 = mx.float32, mx.float16, mx.bfloat16

METAL_CASES: list[MetalCase] = [
    MetalCase("elementwise_2d_edge_groups", ("x",), ("y", "sizes"), ELEMENTWISE_2D,
              (45, 37, 1), (16, 8, 1), ((37, 45), (37, 45)), (F32, mx.uint32),
              lambda r: [_normal(r, 37, 45)],
              lambda a: [a[0] * a[0] + 1, _edge_sizes(37, 45, (16, 8))]),
    MetalCase("gelu_half_io", ("x",), ("y",), GELU_HALF, (500, 1, 1), (128, 1, 1), ((500,),),
              (F16,), lambda r: [_normal(r, 500, dtype=F16)],
              lambda a: [_gelu(a[0])],
              rtol=2e-3, atol=2e-3),
    MetalCase("bfloat16_and_half_io", ("x", "w"), ("y", "h"), BF16_MIXED, (300, 1, 1),
              (64, 1, 1), ((300,), (300,)), (BF16, F16),
              lambda r: [_normal(r, 300, dtype=BF16), _normal(r, 64, dtype=F16)],
              lambda a: [_bf16(_scale_shift(a)), _scale_shift(a).astype(np.float16)],
              rtol=8e-3, atol=1e-3),  # one bfloat16 ulp
    MetalCase("row_sum_simd_sum", ("x",), ("out",), ROW_SUM, (128, 37, 1), (128, 1, 1),
              ((37,),), (F32,), lambda r: [_normal(r, 37, 300)],
              lambda a: [a[0].sum(axis=1)], rtol=1e-4, atol=1e-4),
    MetalCase("threadgroup_exclusive_scan", ("x",), ("out",), BLOCK_SCAN, (300, 1, 1),
              (128, 1, 1), ((300,),), (mx.int32,),
              lambda r: [mx.array(r.integers(-50, 50, 300).astype(np.int32))],
              lambda a: [_segments(a[0], 128, lambda s: np.cumsum(s) - s)]),
    MetalCase("shuffle_xor_butterfly", ("x",), ("row_max", "swapped"), BUTTERFLY, (128, 1, 1),
              (64, 1, 1), ((128,), (128,)), (F32, F32), lambda r: [_normal(r, 128)],
              lambda a: [_segments(a[0], 32, lambda s: np.full(32, s.max())),
                         a[0][np.arange(128) ^ 5]]),
    MetalCase("softmax_rows", ("x",), ("y",), SOFTMAX, (128, 5, 1), (128, 1, 1), ((5, 333),),
              (F32,), lambda r: [_normal(r, 5, 333) * 4], lambda a: [_softmax(a[0])],
              rtol=1e-4, atol=1e-7),
    MetalCase("tiled_matmul_threadgroup_memory", ("a", "b"), ("c",), TILED_MATMUL, (48, 32, 1),
              (16, 16, 1), ((23, 41),), (F32,),
              lambda r: [_normal(r, 23, 37), _normal(r, 37, 41)], lambda a: [a[0] @ a[1]],
              template=(("TILE", 16),), rtol=1e-4, atol=1e-4),
    MetalCase("simdgroup_matrix_8x8", ("a", "b"), ("c",), SIMDGROUP_MATMUL, (128, 1, 1),
              (128, 1, 1), ((16, 16),), (F32,),
              lambda r: [_normal(r, 16, 32), _normal(r, 32, 16)], lambda a: [a[0] @ a[1]],
              rtol=1e-4, atol=1e-4),
    MetalCase("atomic_histogram_init_value", ("x",), ("bins", "total"), ATOMIC_HIST,
              (5003, 1, 1), (128, 1, 1), ((16,), (1,)), (mx.uint32, F32),
              lambda r: [mx.array(r.integers(0, 1000, 5003).astype(np.int32))],
              lambda a: [np.bincount(a[0] & 15, minlength=16) + 2,
                         np.array([(a[0] & 15).sum() + 2])],
              atomic_outputs=True, init_value=2),
    MetalCase("template_type_int_bool", ("x",), ("y",), TEMPLATE_TYPES, (100, 1, 1),
              (32, 1, 1), ((400,),), (F16,), lambda r: [_normal(r, 400, dtype=F16)],
              lambda a: [-(a[0] * a[0])], template=(("T", F16), ("N", 4), ("NEGATE", True)),
              rtol=1e-3, atol=1e-4),
    MetalCase("shape_strides_non_contiguous", ("x",), ("y",), STRIDED_GATHER, (120, 1, 1),
              (64, 1, 1), ((6, 4, 5),), (F32,),
              lambda r: [_normal(r, 4, 5, 6).transpose(2, 0, 1)], lambda a: [a[0] * 2],
              ensure_row_contiguous=False),
    MetalCase("python_scalar_inputs", ("x", "y", "alpha", "n"), ("out",), SCALAR_INPUTS,
              (1024, 1, 1), (256, 1, 1), ((1000,),), (F32,),
              lambda r: [_normal(r, 1000), _normal(r, 1000), 2.5, 1000],
              lambda a: [np.float32(a[2]) * a[0] + a[1]]),
]


def run_metal_case(case: MetalCase, runner: Runner, seed: int = 0) -> tuple[list, LaunchRecord]:
    """Run ``case`` on a Metal runner (``runners.get(name)``: metal_sim, mlx_metal) with fresh
    inputs from ``seed``. Returns (the inputs as given to the kernel, the runner's record)."""
    inputs = case.make(np.random.default_rng(seed))
    kernel = runner.kernel(
        name=case.name, input_names=list(case.input_names),
        output_names=list(case.output_names), source=case.source, header=case.header,
        ensure_row_contiguous=case.ensure_row_contiguous, atomic_outputs=case.atomic_outputs)
    record = kernel.launch(inputs=inputs, output_shapes=[list(s) for s in case.output_shapes],
                           output_dtypes=list(case.output_dtypes), grid=case.grid,
                           threadgroup=case.threadgroup, template=list(case.template) or None,
                           init_value=case.init_value)
    return inputs, record
