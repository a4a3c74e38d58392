import numpy as np


def dgamma_dbeta(inputs, sizes):
    x = inputs["x"].astype(np.float64)
    dy = inputs["dy"].astype(np.float64)
    mean = inputs["mean"].astype(np.float64)[:, None]
    rstd = inputs["rstd"].astype(np.float64)[:, None]
    return {
        "dgamma": (dy * (x - mean) * rstd).sum(axis=0).astype(np.float32),
        "dbeta": dy.sum(axis=0).astype(np.float32),
    }
