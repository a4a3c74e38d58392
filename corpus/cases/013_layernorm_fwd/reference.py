import numpy as np


def layernorm(inputs, sizes):
    x = inputs["x"].astype(np.float64)
    eps = float(inputs["eps"])
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    y = (x - mean) * rstd * inputs["gamma"].astype(np.float64) + inputs["beta"]
    return {
        "y": y.astype(np.float32),
        "mean_out": mean[:, 0].astype(np.float32),
        "rstd_out": rstd[:, 0].astype(np.float32),
    }
