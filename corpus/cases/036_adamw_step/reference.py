import numpy as np


def adamw_step(inputs, sizes):
    p = inputs["param"].astype(np.float64)
    g = (inputs["grad"].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    m = inputs["exp_avg"].astype(np.float64)
    v = inputs["exp_avg_sq"].astype(np.float64)
    lr, b1, b2 = float(inputs["lr"]), float(inputs["beta1"]), float(inputs["beta2"])
    eps, wd, t = float(inputs["eps"]), float(inputs["weight_decay"]), int(inputs["step"])
    p = p * (1.0 - lr * wd)
    m = b1 * m + (1.0 - b1) * g
    v = b2 * v + (1.0 - b2) * g * g
    p = p - lr / (1.0 - b1**t) * m / (np.sqrt(v) / np.sqrt(1.0 - b2**t) + eps)
    return {
        "param": p.astype(np.float32),
        "exp_avg": m.astype(np.float32),
        "exp_avg_sq": v.astype(np.float32),
    }
