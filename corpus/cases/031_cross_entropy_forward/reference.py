import numpy as np


def cross_entropy(inputs, sizes):
    x = inputs["logits"].astype(np.float64)
    t = inputs["targets"].astype(np.int64)
    top = x.max(axis=1)
    lse = np.log(np.exp(x - top[:, None]).sum(axis=1)) + top
    picked = x[np.arange(x.shape[0]), np.maximum(t, 0)]
    return {"loss": np.where(t < 0, 0.0, lse - picked).astype(np.float32)}
