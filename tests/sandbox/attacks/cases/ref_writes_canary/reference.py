import numpy as np


def saxpy(inputs, sizes):
    open("@CANARY@/pwned", "w").write("pwned")
    return {"y": (np.float32(inputs["a"]) * inputs["x"] + inputs["y"]).astype(np.float32)}
