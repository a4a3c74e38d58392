import numpy as np


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def rope_neox(inputs, sizes):
    half = sizes["head_dim"] // 2
    cs = inputs["cos_sin"].astype(np.float64)[inputs["positions"]]  # [tokens, D]
    cos, sin = cs[:, None, :half], cs[:, None, half:]
    q = _rotate(inputs["q"].astype(np.float64), cos, sin)
    k = _rotate(inputs["k"].astype(np.float64), cos, sin)
    return {"q": q.astype(np.float32), "k": k.astype(np.float32)}
