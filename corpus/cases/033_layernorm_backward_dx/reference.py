import numpy as np


def layernorm_backward_dx(inputs, sizes):
    x = inputs["x"].astype(np.float64)
    dy = inputs["dy"].astype(np.float64)
    gamma = inputs["gamma"].astype(np.float64)
    mean = inputs["mean"].astype(np.float64)[:, None]
    rstd = inputs["rstd"].astype(np.float64)[:, None]
    g = dy * gamma
    xhat = (x - mean) * rstd
    dx = rstd * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
    return {"dx": dx.astype(np.float16)}
