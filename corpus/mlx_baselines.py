"""MLX baselines for corpus cases: the same work done by MLX's own ops, to time a port against.

A case whose computation MLX has built in (mx.softmax, mx.fast.layer_norm, mx.fast.rms_norm,
matmul, ...) gets a baseline here: ``mlx_baseline(case_id, scalars)`` gives (what it is, a
function of the inputs by argument name, as mx.arrays, to the outputs by argument name), under
``mx.compile``, so a composition of ops is fused as MLX would run it in a model. Each baseline
computes every output the case checks (tests/corpus/test_mlx_baselines.py compares them with
the case's reference on MLX's CPU device). Cases not listed have no MLX equivalent here
(attention cases also return the log-sum-exp, which MLX's fused attention does not).
"""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
import mlx.nn as nn

# (inputs by argument name as mx.arrays, the case's scalars as Python numbers) -> outputs
Baseline = Callable[[dict, dict], dict]


def _saxpy(v: dict, s: dict) -> dict:
    return {"y": v["a"] * v["x"] + v["y"]}


def _gelu_tanh(v: dict, s: dict) -> dict:
    return {"y": nn.gelu_approx(v["x"])}


def _silu_and_mul(v: dict, s: dict) -> dict:
    gate, up = mx.split(v["x"].astype(mx.float32), 2, axis=-1)
    return {"out": (nn.silu(gate) * up).astype(mx.float16)}


def _row_max(v: dict, s: dict) -> dict:
    return {"out": mx.max(v["x"], axis=1)}


def _softmax(v: dict, s: dict) -> dict:
    return {"y": mx.softmax(v["x"], axis=-1, precise=True)}


def _layernorm(v: dict, s: dict) -> dict:
    x = v["x"]
    mean = mx.mean(x, axis=1)
    rstd = mx.rsqrt(mx.var(x, axis=1) + s["eps"])
    return {"y": mx.fast.layer_norm(x, v["gamma"], v["beta"], s["eps"]),
            "mean_out": mean, "rstd_out": rstd}


def _fused_add_rmsnorm(v: dict, s: dict) -> dict:
    z = v["x"] + v["residual"]
    return {"x": mx.fast.rms_norm(z, v["weight"], s["eps"]), "residual": z}


def _transpose(v: dict, s: dict) -> dict:
    return {"out": mx.contiguous(v["in"].T)}  # a copy: a transposed view would do no work


def _gemm(v: dict, s: dict) -> dict:
    return {"C": v["A"] @ v["B"]}


def _embedding(v: dict, s: dict) -> dict:
    table, ids = v["table"], v["ids"]
    valid = (ids >= 0) & (ids < table.shape[0])
    rows = mx.take(table, mx.where(valid, ids, 0), axis=0)
    return {"out": mx.where(valid[:, None], rows, 0.0)}


# case id -> (what the baseline is, its function)
BASELINES: dict[str, tuple[str, Baseline]] = {
    "001_saxpy": ("MLX a * x + y", _saxpy),
    "002_gelu_tanh": ("MLX nn.gelu_approx", _gelu_tanh),
    "003_silu_and_mul_half": ("MLX nn.silu(gate) * up", _silu_and_mul),
    "008_row_max": ("MLX mx.max over rows", _row_max),
    "011_softmax_naive": ("MLX mx.softmax(precise=True)", _softmax),
    "012_softmax_online": ("MLX mx.softmax(precise=True)", _softmax),
    "013_layernorm_fwd": ("MLX mx.fast.layer_norm with mean and rstd", _layernorm),
    "014_fused_add_rmsnorm_half": ("MLX add then mx.fast.rms_norm", _fused_add_rmsnorm),
    "016_transpose_tiled": ("MLX mx.contiguous(x.T)", _transpose),
    "018_gemm_naive": ("MLX matmul", _gemm),
    "019_gemm_smem_tiled": ("MLX matmul", _gemm),
    "020_gemm_register_blocked": ("MLX matmul", _gemm),
    "024_embedding_gather": ("MLX mx.take with masked ids", _embedding),
}


def mlx_baseline(case_id: str, scalars: dict) -> tuple[str, Callable[[dict], dict]] | None:
    """(what it is, a compiled function of the inputs by argument name) of the case's MLX
    baseline, its ``scalars`` (the case's scalar arguments as Python numbers at the sizes to
    run: eps, ...) fixed; None for a case without one."""
    if case_id not in BASELINES:
        return None
    what, fn = BASELINES[case_id]
    fixed = dict(scalars)
    return f"{what} (mx.compile)", mx.compile(lambda inputs: fn(inputs, fixed))
