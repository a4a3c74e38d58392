import numpy as np


def conv2d(inputs, sizes):
    x = inputs["x"].astype(np.float64)  # (N, Cin, H, W)
    w = inputs["w"].astype(np.float64)  # (Cout, Cin, 3, 3)
    h, wd = x.shape[2], x.shape[3]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], h, wd))
    for ky in range(3):
        for kx in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, ky : ky + h, kx : kx + wd], w[:, :, ky, kx])
    out += inputs["bias"].astype(np.float64)[None, :, None, None]
    return {"out": out.astype(np.float32)}
