import numpy as np


def sum_atomic(inputs, sizes):
    return {"out": np.array([inputs["x"].astype(np.float64).sum()], dtype=np.float32)}
