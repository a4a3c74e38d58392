import numpy as np


def gelu_tanh(inputs, sizes):
    x = inputs["x"].astype(np.float64)
    y = 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    return {"y": y.astype(np.float32)}
