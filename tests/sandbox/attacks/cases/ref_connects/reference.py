import numpy as np


def saxpy(inputs, sizes):
    import socket
    socket.create_connection(("127.0.0.1", @PORT@), timeout=5)
    return {"y": (np.float32(inputs["a"]) * inputs["x"] + inputs["y"]).astype(np.float32)}
