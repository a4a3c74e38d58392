"""Wild entries from vLLM's csrc (activations, RMS norms through cub::BlockReduce, rotary
embedding in place) and DeepSpeed's inference ops (16-byte vector accesses through inline PTX):
torch extensions whose host functions take tensors, so the sizes a user types name the host's
locals (`d`, `num_tokens`, `hidden_size`). numpy from each op's definition in its project."""

from __future__ import annotations

import numpy as np

from tests.wild.catalog import _f32, _i, _l
from tests.wild.harness import Wild

EPS = np.float32(1e-5)
MAX_POS = 64  # rows of the rotary cos/sin cache


def _tokens(d: int, n: int) -> dict:
    return {"d": d, "num_tokens": n}


def _hidden(h: int, n: int) -> dict:
    return {"hidden_size": h, "num_tokens": n}


def _silu_and_mul(i, s):  # out = silu(x[:, :d]) * x[:, d:]
    x = i["input"].astype(np.float64).reshape(s["num_tokens"], 2, s["d"])
    return {"out": x[:, 0] / (1 + np.exp(-x[:, 0])) * x[:, 1]}


def _gelu_new(i, s):  # the tanh approximation, vLLM's constant 0.79788456
    x = i["input"].astype(np.float64)
    return {"out": 0.5 * x * (1 + np.tanh(0.79788456 * (x + 0.044715 * x ** 3)))}


def _rms(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + float(eps)) * w.astype(np.float64)


def _rms_inputs(s, r):
    return {"input": _f32(r, s["hidden_size"] * s["num_tokens"]),
            "weight": _f32(r, s["hidden_size"]), "epsilon": EPS,
            **{k: _i(v) for k, v in s.items()}}


def _fused_inputs(s, r):
    return {**_rms_inputs(s, r), "residual": _f32(r, s["hidden_size"] * s["num_tokens"])}


def _fused_add_rms(i, s):  # residual <- input + residual; input <- rms_norm(residual) * weight
    z = (i["input"] + i["residual"]).reshape(s["num_tokens"], s["hidden_size"])
    return {"residual": z, "input": _rms(z, i["weight"], i["epsilon"])}


def _rotary_sizes(tokens, rot, heads, kv_heads, head):
    return {"num_tokens": tokens, "rot_dim": rot, "num_heads": heads, "num_kv_heads": kv_heads,
            "head_size": head, "query_stride": heads * head, "key_stride": kv_heads * head}


def _rotary_inputs(s, r):
    return {"positions": r.integers(0, MAX_POS, s["num_tokens"]).astype(np.int64),
            "query": _f32(r, s["num_tokens"] * s["query_stride"]),
            "key": _f32(r, s["num_tokens"] * s["key_stride"]),
            "cos_sin_cache": _f32(r, MAX_POS * s["rot_dim"]),
            **{k: (_l(v) if k.endswith("stride") else _i(v)) for k, v in s.items()}}


def _rotary_neox(i, s):
    """GPT-NeoX rotary embedding, in place: of each head's first rot_dim elements the two
    halves (x, y) become (x cos - y sin, y cos + x sin); the rest of the head is left alone."""
    half = s["rot_dim"] // 2
    cache = i["cos_sin_cache"].astype(np.float64).reshape(MAX_POS, s["rot_dim"])
    out = {}
    for name, heads, stride in (("query", s["num_heads"], s["query_stride"]),
                                ("key", s["num_kv_heads"], s["key_stride"])):
        a = i[name].astype(np.float64).reshape(s["num_tokens"], stride).copy()
        for t in range(s["num_tokens"]):
            cos, sin = cache[i["positions"][t], :half], cache[i["positions"][t], half:]
            for h in range(heads):
                b = h * s["head_size"]
                x, y = a[t, b:b + half].copy(), a[t, b + half:b + 2 * half].copy()
                a[t, b:b + half], a[t, b + half:b + 2 * half] = x * cos - y * sin, \
                    y * cos + x * sin
        out[name] = a
    return out


ENTRIES: list[Wild] = [
    Wild("vllm_silu_and_mul", "vllm", "csrc/activation_kernels.cu",
         "act_and_mul_kernel<float, silu_kernel<float>>",
         sizes=_tokens(300, 5), held_out=(_tokens(77, 3), _tokens(2000, 4)),
         inputs=lambda s, r: {"input": _f32(r, 2 * s["d"] * s["num_tokens"]), "d": _i(s["d"])},
         reference=_silu_and_mul, note="launch in a #define body, VLLM_LDG macro"),
    Wild("vllm_gelu_new", "vllm", "csrc/activation_kernels.cu",
         "activation_kernel<float, gelu_new_kernel<float>>",
         sizes=_tokens(300, 5), held_out=(_tokens(77, 3), _tokens(2000, 4)),
         inputs=lambda s, r: {"input": _f32(r, s["d"] * s["num_tokens"]), "d": _i(s["d"])},
         reference=_gelu_new, rtol=1e-5, atol=1e-6),
    Wild("vllm_rms_norm", "vllm", "csrc/layernorm_kernels.cu", "rms_norm_kernel<float>",
         sizes=_hidden(300, 5), held_out=(_hidden(77, 3), _hidden(2500, 7)),
         inputs=_rms_inputs, reference=lambda i, s: {"out": _rms(i["input"].reshape(
             s["num_tokens"], s["hidden_size"]), i["weight"], i["epsilon"])},
         rtol=1e-4, atol=1e-5, note="cub::BlockReduce on a 300-thread block"),
    Wild("vllm_fused_add_rms_norm", "vllm", "csrc/layernorm_kernels.cu",
         "fused_add_rms_norm_kernel<float, 0>",
         sizes=_hidden(300, 5), held_out=(_hidden(77, 3), _hidden(2500, 7)),
         inputs=_fused_inputs, reference=_fused_add_rms, rtol=1e-4, atol=1e-5,
         note="two overloads chosen by enable_if; in place"),
    Wild("vllm_rotary_embedding", "vllm", "csrc/pos_encoding_kernels.cu",
         "rotary_embedding_kernel<float, true>",
         sizes=_rotary_sizes(6, 32, 4, 2, 32),
         held_out=(_rotary_sizes(3, 16, 3, 1, 16), _rotary_sizes(5, 32, 2, 2, 64)),
         inputs=_rotary_inputs, reference=_rotary_neox,
         note="in place with gaps when rot_dim < head_size"),
    Wild("deepspeed_vector_add", "deepspeed", "csrc/transformer/inference/csrc/pointwise_ops.cu",
         "vector_add_kernel<float>", sizes={"num_elems": 5000},
         # 16-byte accesses: DeepSpeed's callers pass multiples of 4 floats
         held_out=({"num_elems": 776}, {"num_elems": 70000}),
         inputs=lambda s, r: {"a": _f32(r, s["num_elems"]), "b": _f32(r, s["num_elems"]),
                              "gamma": np.float32(0.75), "num_elems": _i(s["num_elems"])},
         reference=lambda i, s: {"out": 0.75 * i["a"].astype(np.float64) + i["b"]},
         include=("csrc/includes",), note="predicated ld.global.v4 inline PTX"),
]
