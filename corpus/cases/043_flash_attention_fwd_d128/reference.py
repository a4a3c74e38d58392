import numpy as np


def attention(inputs, sizes, causal=False):
    """Exact attention in float64: o = softmax(scale * q k^T + mask) v, and the natural-log LSE."""
    q = inputs["q"].astype(np.float64)
    k = inputs["k"].astype(np.float64)
    v = inputs["v"].astype(np.float64)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * float(inputs["scale"])
    if causal:
        lq, lk = s.shape[-2:]
        s = np.where(np.arange(lk)[None, :] > np.arange(lq)[:, None], -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    denom = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhqk,bhkd->bhqd", p / denom, v)
    lse = (m + np.log(denom))[..., 0]
    return {"o": o.astype(inputs["q"].dtype), "lse": lse.astype(np.float32)}


def attention_causal(inputs, sizes):
    return attention(inputs, sizes, causal=True)
