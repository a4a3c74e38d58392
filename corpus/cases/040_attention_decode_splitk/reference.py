import numpy as np


def decode_attention(inputs, sizes):
    """Exact single-query attention with grouped KV heads, float64 softmax."""
    q = inputs["q"].astype(np.float64)  # [B, Hq, D]
    k = inputs["k"].astype(np.float64)  # [B, Hkv, L, D]
    v = inputs["v"].astype(np.float64)
    gqa = int(inputs["gqa"])
    k = np.repeat(k, gqa, axis=1)
    v = np.repeat(v, gqa, axis=1)
    s = np.einsum("bhd,bhld->bhl", q, k) * float(inputs["scale"])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return {"o": np.einsum("bhl,bhld->bhd", p, v).astype(np.float16)}
