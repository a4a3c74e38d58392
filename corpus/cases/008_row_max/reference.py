import numpy as np


def row_max(inputs, sizes):
    return {"out": inputs["x"].max(axis=1).astype(np.float32)}
