import numpy as np


def int8_matmul(inputs, sizes):
    x = inputs["X"].astype(np.float64)
    w = inputs["W"].astype(np.float64) * inputs["scale"].astype(np.float64)[:, None]
    return {"Y": (x @ w.T).astype(np.float32)}
