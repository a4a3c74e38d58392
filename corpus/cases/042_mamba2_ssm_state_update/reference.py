import numpy as np


def state_update(inputs, sizes):
    """One Mamba-2 recurrence step in float64."""
    x = inputs["x"].astype(np.float64)  # [B, H, P]
    dt = inputs["dt"].astype(np.float64) + inputs["dt_bias"].astype(np.float64)[None]
    dt = np.where(dt > 20.0, dt, np.log1p(np.exp(np.minimum(dt, 20.0))))  # [B, H]
    A = -np.exp(inputs["A_log"].astype(np.float64))  # [H]
    heads, groups = x.shape[1], inputs["B"].shape[1]
    Bm = np.repeat(inputs["B"].astype(np.float64), heads // groups, axis=1)  # [B, H, N]
    Cm = np.repeat(inputs["C"].astype(np.float64), heads // groups, axis=1)
    state = inputs["state"].astype(np.float64)  # [B, H, P, N]
    dA = np.exp(dt * A[None])
    state = dA[..., None, None] * state + (dt[..., None] * x)[..., None] * Bm[:, :, None, :]
    y = (state * Cm[:, :, None, :]).sum(-1) + inputs["D"].astype(np.float64)[None, :, None] * x
    return {"state": state.astype(np.float32), "y": y.astype(np.float32)}
