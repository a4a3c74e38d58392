"""The wild set: real kernels, what a user types to port each, and numpy written from each
kernel's documented semantics (the op's definition in its project, not kport's output).

Each entry's ``inputs(sizes, rng)`` gives what a caller of the package holds at a size set:
the kernel's arguments by their CUDA names plus the host function's sizes (run() takes the
ones it asks for); ``reference(inputs, sizes)`` the outputs numpy computes. Held-out sizes are
never given to kport. Entries are added by the catalog_*.py files next to this one.
"""

from __future__ import annotations

import math

import numpy as np

from tests.wild.harness import Wild

GGML = "vendor/llama.cpp/ggml"
CU = f"{GGML}/src/ggml-cuda"
GGML_I = (f"{GGML}/include", f"{GGML}/src")  # the -I folders of llama.cpp's own CMake build
FLT_MAX = float(np.finfo(np.float32).max)


def _f32(rng, n, scale=1.0):
    return (rng.standard_normal(int(n)) * scale).astype(np.float32)


def _i(v):
    return np.int32(v)


def _l(v):
    return np.int64(v)


ENTRIES: list[Wild] = [
    Wild("clamp", "llama.cpp", f"{CU}/clamp.cu", "op_clamp_kernel<float>",
         sizes={"k": 1000}, held_out=({"k": 4097}, {"k": 1}),
         inputs=lambda s, r: {"x": _f32(r, s["k"], 2), "min": np.float32(-0.5),
                              "max": np.float32(0.75), "k": _i(s["k"])},
         reference=lambda i, s: {"dst": np.clip(i["x"], i["min"], i["max"])},
         include=GGML_I),
    Wild("scale", "llama.cpp", f"{CU}/scale.cu", "scale_f32<float>",
         sizes={"nelements": 3000}, held_out=({"nelements": 777}, {"nelements": 70000}),
         inputs=lambda s, r: {"x": _f32(r, s["nelements"]), "scale": np.float32(0.37),
                              "bias": np.float32(-1.25), "nelements": _l(s["nelements"])},
         reference=lambda i, s: {"dst": i["scale"] * i["x"] + i["bias"]},
         include=GGML_I, rtol=1e-6),
    Wild("arange", "llama.cpp", f"{CU}/arange.cu", "arange_f32",
         sizes={"ne0": 500}, held_out=({"ne0": 1025}, {"ne0": 3}),
         inputs=lambda s, r: {"ne0": _i(s["ne0"]), "start": np.float32(-3.0),
                              "step": np.float32(0.25)},
         reference=lambda i, s: {"dst": (i["start"] + i["step"] * np.arange(
             s["ne0"], dtype=np.float32)).astype(np.float32)},
         include=GGML_I),
    Wild("softcap", "llama.cpp", f"{CU}/softcap.cu", "softcap_f32",
         sizes={"k": 2048}, held_out=({"k": 333},),
         inputs=lambda s, r: {"x": _f32(r, s["k"], 3), "scale": np.float32(0.5),
                              "softcap": np.float32(30.0), "k": _i(s["k"])},
         reference=lambda i, s: {"dst": np.tanh(i["scale"] * i["x"].astype(np.float64))
                                 * i["softcap"]},
         include=GGML_I, rtol=1e-5, atol=1e-4),
    Wild("silu", "llama.cpp", f"{CU}/unary.cu", "unary_op_kernel<op_silu, float>",
         sizes={"k": 1500}, held_out=({"k": 257},),
         inputs=lambda s, r: {"x": _f32(r, s["k"], 3), "k": _i(s["k"])},
         reference=lambda i, s: {"dst": i["x"] / (1 + np.exp(-i["x"].astype(np.float64)))},
         include=GGML_I, rtol=1e-5, atol=1e-6),
    Wild("gelu_erf", "llama.cpp", f"{CU}/unary.cu", "unary_op_kernel<op_gelu_erf, float>",
         sizes={"k": 1500}, held_out=({"k": 99},),
         inputs=lambda s, r: {"x": _f32(r, s["k"], 3), "k": _i(s["k"])},
         reference=lambda i, s: {"dst": np.array(
             [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in i["x"].astype(float)])},
         include=GGML_I, rtol=1e-5, atol=2e-6),
    Wild("diag_mask_inf", "llama.cpp", f"{CU}/diagmask.cu", "diag_mask_inf_f32",
         sizes={"ncols_x": 40, "nrows_x": 24, "rows_per_channel": 8, "n_past": 3},
         held_out=({"ncols_x": 17, "nrows_x": 9, "rows_per_channel": 3, "n_past": 5},),
         inputs=lambda s, r: {"x": _f32(r, s["ncols_x"] * s["nrows_x"]),
                              "ncols": _i(s["ncols_x"]), "ncols_x": s["ncols_x"],
                              "nrows_x": s["nrows_x"],
                              "rows_per_channel": _i(s["rows_per_channel"]),
                              "n_past": _i(s["n_past"])},
         reference=lambda i, s: {"dst": _diag_mask(i["x"], s)},
         include=GGML_I),
    Wild("concat_dim0", "llama.cpp", f"{CU}/concat.cu", "concat_cont<float, 0>",
         sizes={"ne00": 5, "ne01": 6, "ne02": 3, "ne0": 12, "ne1": 6, "ne2": 3},
         held_out=({"ne00": 9, "ne01": 4, "ne02": 2, "ne0": 10, "ne1": 4, "ne2": 2},),
         inputs=lambda s, r: {
             "x": _f32(r, s["ne00"] * s["ne01"] * s["ne02"]),
             "y": _f32(r, (s["ne0"] - s["ne00"]) * s["ne1"] * s["ne2"]),
             **{k: _l(v) for k, v in s.items()}},
         reference=lambda i, s: {"dst": np.concatenate(
             [i["x"].reshape(s["ne2"], s["ne1"], s["ne00"]),
              i["y"].reshape(s["ne2"], s["ne1"], s["ne0"] - s["ne00"])], axis=2)},
         include=GGML_I),
    Wild("roll", "llama.cpp", f"{CU}/roll.cu", "roll_f32_cuda",
         sizes={"ne00": 7, "ne01": 5, "ne02": 3, "ne03": 2},
         held_out=({"ne00": 4, "ne01": 9, "ne02": 2, "ne03": 3},),
         inputs=lambda s, r: {
             "src": _f32(r, s["ne00"] * s["ne01"] * s["ne02"] * s["ne03"]),
             **{k: _l(v) for k, v in s.items()},
             # shifts within (-ne, ne), as ggml_roll's contract says
             "s0": _i(2 - s["ne00"]), "s1": _i(-1), "s2": _i(1), "s3": _i(1)},
         reference=lambda i, s: {"dst": np.roll(
             i["src"].reshape(s["ne03"], s["ne02"], s["ne01"], s["ne00"]),
             (int(i["s3"]), int(i["s2"]), int(i["s1"]), int(i["s0"])), axis=(0, 1, 2, 3))},
         include=GGML_I),
    Wild("adamw", "llama.cpp", f"{CU}/opt-step-adamw.cu", "opt_step_adamw_f32",
         sizes={"k": 1000}, held_out=({"k": 4099},),
         inputs=lambda s, r: {"x": _f32(r, s["k"]), "g": _f32(r, s["k"]),
                              "g_m": _f32(r, s["k"], 0.1),
                              "g_v": np.abs(_f32(r, s["k"], 0.1)),
                              "pars": np.array([1e-3, 0.9, 0.999, 1e-8, 0.01, 1 / (1 - 0.9),
                                                1 / (1 - 0.999)], np.float32),
                              "k": _l(s["k"])},
         reference=lambda i, s: _adamw(i), include=GGML_I, rtol=1e-5, atol=1e-6),
    Wild("timestep_embedding", "llama.cpp", f"{CU}/tsembd.cu", "timestep_embedding_f32",
         sizes={"ne00": 6, "nb1": 4 * 33, "dim": 33, "max_period": 10000},
         held_out=({"ne00": 3, "nb1": 4 * 64, "dim": 64, "max_period": 1000},),
         inputs=lambda s, r: {"timesteps": np.abs(_f32(r, s["ne00"], 100)),
                              "nb1": _i(s["nb1"]), "dim": _i(s["dim"]),
                              "max_period": _i(s["max_period"]), "ne00": s["ne00"]},
         reference=lambda i, s: {"dst": _tsembd(i["timesteps"], s["dim"], s["max_period"])},
         include=GGML_I, rtol=1e-4, atol=1e-4),
    Wild("norm", "llama.cpp", f"{CU}/norm.cu", "norm_f32<1024>",
         sizes={"ncols": 1500, "nrows": 3, "nchannels": 2, "nsamples": 2, "stride_row": 1500,
                "stride_channel": 4500, "stride_sample": 9000},
         held_out=({"ncols": 2000, "nrows": 2, "nchannels": 3, "nsamples": 1,
                    "stride_row": 2000, "stride_channel": 4000, "stride_sample": 12000},),
         inputs=lambda s, r: {"x": _f32(r, s["ncols"] * s["nrows"] * s["nchannels"]
                                        * s["nsamples"], 2) + 1,
                              "eps": np.float32(1e-5),
                              **{k: (_i(v) if k == "ncols" else _l(v)) for k, v in s.items()}},
         reference=lambda i, s: {"dst": _norm(i["x"].reshape(-1, s["ncols"]), 1e-5)},
         include=GGML_I, rtol=1e-4, atol=1e-4),
]


def _diag_mask(x: np.ndarray, s: dict) -> np.ndarray:
    """dst = x - (col > n_past + row % rows_per_channel) * FLT_MAX, in float32."""
    x = x.reshape(s["nrows_x"], s["ncols_x"])
    masked = np.arange(s["ncols_x"])[None, :] > s["n_past"] + (
        np.arange(s["nrows_x"]) % s["rows_per_channel"])[:, None]
    return np.where(masked, x - np.float32(FLT_MAX), x).astype(np.float32)


def _adamw(i: dict) -> dict:
    alpha, b1, b2, eps, wd, b1h, b2h = (float(v) for v in i["pars"])
    g = i["g"].astype(np.float64)
    m = i["g_m"] * b1 + g * (1 - b1)
    v = i["g_v"] * b2 + g * g * (1 - b2)
    x = i["x"] * (1 - alpha * wd) - alpha * (m * b1h) / (np.sqrt(v * b2h) + eps)
    return {"x": x, "g_m": m, "g_v": v}


def _tsembd(t: np.ndarray, dim: int, max_period: int) -> np.ndarray:
    half = dim // 2
    out = np.zeros((t.size, dim), np.float64)
    freq = np.exp(-math.log(max_period) * np.arange(half) / half)
    arg = t.astype(np.float64)[:, None] * freq[None, :]
    out[:, :half], out[:, half:2 * half] = np.cos(arg), np.sin(arg)
    return out


def _norm(x: np.ndarray, eps: float) -> np.ndarray:
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps)


def all_entries() -> list[Wild]:
    """This file's entries and those of every tests/wild/catalog_*.py (each defines
    ``ENTRIES``), ids unique."""
    import importlib  # here: the catalog_* files import this module's helpers
    from pathlib import Path

    out = list(ENTRIES)
    for path in sorted(Path(__file__).parent.glob("catalog_*.py")):
        out += importlib.import_module(f"tests.wild.{path.stem}").ENTRIES
    ids = [w.id for w in out]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"tests/wild: kernel id {dupes[0]!r} is defined twice")
    return out
