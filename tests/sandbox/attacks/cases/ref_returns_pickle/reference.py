import numpy as np


def saxpy(inputs, sizes):
    return {"y": np.array([object()], dtype=object)}
