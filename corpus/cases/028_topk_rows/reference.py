import numpy as np


def topk(inputs, sizes):
    x, k = inputs["x"], 8
    order = np.argsort(-x.astype(np.float64), axis=1, kind="stable")[:, :k]
    return {"values": np.take_along_axis(x, order, axis=1), "indices": order.astype(np.int32)}
