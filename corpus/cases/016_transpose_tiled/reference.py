import numpy as np


def transpose(inputs, sizes):
    return {"out": np.ascontiguousarray(inputs["in"].T)}
