import numpy as np


def row_argmax(inputs, sizes):
    return {"out": np.argmax(inputs["x"], axis=1).astype(np.int32)}  # first maximum
