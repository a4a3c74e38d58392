import numpy as np


def silu_and_mul(inputs, sizes):
    d = sizes["d"]
    x = inputs["x"].astype(np.float64)
    gate, up = x[:, :d], x[:, d:]
    return {"out": (gate / (1.0 + np.exp(-gate)) * up).astype(np.float16)}
