import numpy as np


def dequantize(qs, d, n, k):
    """Q4_0-like rows: per 32-weight block, byte j holds weight j (low) and j + 16 (high)."""
    q = qs.reshape(n, k // 32, 16)
    nibbles = np.concatenate([q & 0xF, q >> 4], axis=-1).astype(np.float64) - 8.0
    return (nibbles * d.astype(np.float64).reshape(n, k // 32, 1)).reshape(n, k)


def q4_matmul(inputs, sizes):
    n, k = sizes["N"], sizes["K"]
    w = dequantize(inputs["qs"], inputs["d"], n, k)
    return {"Y": (inputs["X"].astype(np.float64) @ w.T).astype(np.float32)}
