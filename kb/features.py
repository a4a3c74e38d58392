"""Features of a kernel chunk, read from its tree-sitter tokens: intrinsics, shared/threadgroup
memory, warp/SIMD-group ops, atomics, barriers, tensor-core ops, reduced-precision types,
templates, launch bounds, and a guessed op category. They are stored as chunk metadata and are
what ``kport kb search --feature`` filters on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kb.parse import Function

FEATURES = ("shared", "warp", "atomics", "barrier", "tensor", "half", "bfloat", "fp64",
            "template", "launch_bounds", "vector")

_QUALIFIERS = {"__global__", "__device__", "__host__", "__shared__", "__restrict__",
               "__forceinline__", "__noinline__", "__launch_bounds__", "__constant__",
               "__managed__", "__inline__", "__align__", "__half", "__half2", "__nv_bfloat16",
               "__nv_bfloat162", "__CUDA_ARCH__", "__restrict"}
_METAL_INTRINSIC_PREFIXES = ("simd_", "quad_", "atomic_", "threadgroup_barrier",
                             "simdgroup_barrier", "simdgroup_multiply", "simdgroup_load",
                             "simdgroup_store", "fast::", "precise::")
_WARP = ("__shfl", "__ballot", "__any_sync", "__all_sync", "__activemask", "__syncwarp",
         "__reduce_", "__match_", "simd_", "quad_", "warpSize", "tiled_partition",
         "thread_block_tile", "thread_index_in_simdgroup", "simdgroup_index_in_threadgroup",
         "threads_per_simdgroup")
_TENSOR = ("wmma", "mma_sync", "simdgroup_matrix", "simdgroup_multiply_accumulate",
           "simdgroup_float8x8", "simdgroup_half8x8", "ldmatrix", "mma")
_VECTOR = {"float2", "float4", "half2", "half4", "int4", "uint4", "int2", "uint2", "__half2",
           "packed_float4", "packed_half4", "float3", "char4", "uchar4"}

# Category keywords, tried in this order on the kernel's name words, then on its body's words.
CATEGORY_WORDS: tuple[tuple[str, frozenset[str]], ...] = tuple(
    (cat, frozenset(words.split())) for cat, words in (
        ("attention", "attention attn fattn flash sdpa mha"),
        ("ssm", "ssm mamba selective wkv gla delta"),
        ("loss", "loss entropy nll"),
        ("training", "adam adamw sgd backward bwd grad optimizer"),
        ("softmax", "softmax"),
        ("norm", "norm layernorm rmsnorm layer_norm rms groupnorm"),
        ("rope", "rope rotary"),
        ("quant", "quant quantize dequant dequantize q4 q5 q8 q2 q3 q6 iq int8 q4_0 q8_0 mmq "
                  "mmvq"),
        ("gemv", "gemv mv mmv mul_mv matvec mat_vec"),
        ("gemm", "gemm matmul mm mul_mm mul_mat sgemm hgemm mmf wmma mma"),
        ("conv", "conv conv1d conv2d im2col col2im pool"),
        ("sort", "sort argsort topk bitonic"),
        ("transpose", "transpose permute"),
        ("gather", "gather scatter rows getrows get_rows set_rows embedding index"),
        ("scan", "scan cumsum prefix"),
        ("atomic", "histogram hist count"),
        ("reduction", "sum reduce reduction mean max min argmax argmin dot"),
        ("elementwise", "add mul sub div scale saxpy axpy gelu silu relu sigmoid tanh unary "
                        "binary binbcast clamp fill copy cpy cast exp sqr sqrt abs neg"),
    ))


def words(name: str) -> list[str]:
    """Lower-case words of an identifier: ``rmsNormF32`` -> rms, norm, f32."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def _pool(ws: list[str]) -> set[str]:
    return set(ws) | {f"{a}_{b}" for a, b in zip(ws, ws[1:], strict=False)}


def guess_category(name: str, identifiers: Iterable[str] = ()) -> str:
    """The op category a kernel most likely belongs to (its name's words and word pairs first,
    then its body's identifiers), or ``other``."""
    name_words = _pool(words(name))
    body_words = {w for ident in identifiers for w in words(ident)}
    for pool in (name_words, body_words):
        for cat, keys in CATEGORY_WORDS:
            if pool & keys:
                return cat
    return "other"


def intrinsics(idents: Iterable[str]) -> list[str]:
    """The CUDA or Metal intrinsic identifiers among ``idents``, sorted."""
    found = set()
    for t in idents:
        if (t.startswith("__") and t not in _QUALIFIERS and re.fullmatch(r"__\w+", t)) \
                or t.startswith("atomic") or t.startswith(_METAL_INTRINSIC_PREFIXES):
            found.add(t)
    return sorted(found)


def chunk_features(funcs: list[Function]) -> dict[str, object]:
    """Features of a kernel closure (the kernel last): a dict of scalar metadata values."""
    idents = {t.text for f in funcs for t in f.tokens}
    kernel = funcs[-1]
    flags = {
        "shared": bool(idents & {"__shared__", "threadgroup"}),
        "warp": any(t.startswith(_WARP) for t in idents),
        "atomics": any(t.startswith(("atomic", "atomic_")) for t in idents),
        "barrier": bool(idents & {"__syncthreads", "threadgroup_barrier", "__syncthreads_or",
                                  "__syncthreads_and", "__syncthreads_count", "sync"}),
        "tensor": any(t.startswith(_TENSOR) for t in idents),
        "half": bool(idents & {"half", "__half", "half2", "__half2", "half4"}),
        "bfloat": bool(idents & {"bfloat", "__nv_bfloat16", "__nv_bfloat162", "bfloat16_t",
                                 "bfloat4"}),
        "fp64": "double" in idents,
        "template": any(f.template for f in funcs),
        "launch_bounds": kernel.launch_bounds,
        "vector": bool(idents & _VECTOR),
    }
    return {
        **{f"f_{k}": v for k, v in flags.items()},
        "features": ",".join(k for k in FEATURES if flags[k]),
        "intrinsics": ",".join(intrinsics(idents))[:2000],
        "category": guess_category(kernel.name, idents),
    }
