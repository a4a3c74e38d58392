import numpy as np


def bias_add_rows(inputs, sizes):
    return {"y": (inputs["x"] + inputs["bias"][None, :]).astype(np.float32)}
