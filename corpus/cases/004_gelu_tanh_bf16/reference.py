import numpy as np


def _from_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _to_bits(values):
    b = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def gelu_tanh_bf16(inputs, sizes):
    x = _from_bits(inputs["x"])
    y = 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    return {"y": _to_bits(y)}
