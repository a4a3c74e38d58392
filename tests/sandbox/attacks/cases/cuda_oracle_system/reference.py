import numpy as np


def saxpy(inputs, sizes):
    return {"y": (np.float32(inputs["a"]) * inputs["x"] + inputs["y"]).astype(np.float32)}
