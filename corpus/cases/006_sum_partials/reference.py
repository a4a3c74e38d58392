import numpy as np

BLOCK = 256


def sum_partials(inputs, sizes):
    n, blocks = sizes["n"], sizes["blocks"]
    x = inputs["x"].astype(np.float64)
    owner = (np.arange(n) // BLOCK) % blocks  # which block's grid-stride loop reads x[i]
    return {"partials": np.bincount(owner, weights=x, minlength=blocks).astype(np.float32)}
