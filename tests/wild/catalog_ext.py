"""The wild set's PyTorch extensions: torch-cluster, torch-scatter, causal-conv1d and mamba-ssm
kernels, ported from their sdists' csrc/ with only ``-I`` for that folder (their torch/ATen
includes are host libraries kport reads as empty).

Their host code sizes launches from tensor sizes (``x.size(0)``, ``out.numel()``), which no
--size can name, so each entry types the launch the host makes (``--grid``/``--block``) where
kport's one-thread-per-element guess would launch the kernel differently. References follow
each project's CPU or Python reference (``grid_cpu.cpp``, ``fps_cpu.cpp``,
``causal_conv1d_ref``, ``selective_scan_ref``) and its documentation. Arguments of a struct
(``ConvParamsBase params``, ``TensorInfo indptr_info``) are given as a dict of their fields, a
null pointer field left out; outputs reached through a struct are named by the CUDA expression
(``params.out_ptr``).
"""

from __future__ import annotations

import numpy as np

from tests.wild.catalog import _f32, _i, _l
from tests.wild.harness import Wild

CLUSTER = "csrc/cuda"
SCAN = "csrc/selective_scan"


def _ptr(rng, n: int, parts: int) -> np.ndarray:
    """CSR boundaries of ``n`` sorted points in ``parts`` non-empty examples."""
    cuts = np.sort(rng.choice(np.arange(1, n), parts - 1, replace=False)) if parts > 1 else []
    return np.array([0, *cuts, n], np.int64)


def _u32(v):
    return np.uint32(v)


def _u64(v):
    return np.uint64(v)


# --- torch-cluster ------------------------------------------------------------------------------

def _grid_inputs(s, r):
    pos = (r.random((s["numel"], s["D"])) * 10).astype(np.float32)
    return {"pos": pos.reshape(-1), "size": (0.5 + r.random(s["D"]) * 2).astype(np.float32),
            "start": pos.min(0), "end": pos.max(0), "D": _l(s["D"]), "numel": _l(s["numel"])}


def _grid(i, s):
    """grid_cpu.cpp: voxel coordinates (float division truncated) in row-major voxel order."""
    pos = i["pos"].reshape(-1, s["D"])
    start, end, size = i["start"], i["end"], i["size"]
    voxels = ((end - start) / size).astype(np.int64) + 1
    stride = np.concatenate([[1], np.cumprod(voxels)[:-1]])
    return {"out": (((pos - start) / size).astype(np.int64) * stride).sum(1)}


def _nearest_inputs(s, r):
    return {"x": _f32(r, s["N"] * s["dim"]), "y": _f32(r, s["M"] * s["dim"]),
            "ptr_x": _ptr(r, s["N"], s["batch_size"]), "ptr_y": _ptr(r, s["M"], s["batch_size"]),
            "batch_size": _l(s["batch_size"]), "dim": _l(s["dim"]), "N": s["N"], "M": s["M"]}


def _nearest(i, s):
    """torch_cluster.nearest: for each x, the index of the closest y of its example."""
    x, y = i["x"].reshape(-1, s["dim"]), i["y"].reshape(-1, s["dim"])
    out = np.zeros(s["N"], np.int64)
    for b in range(s["batch_size"]):
        (x0, x1), (y0, y1) = i["ptr_x"][b:b + 2], i["ptr_y"][b:b + 2]
        d = ((x[x0:x1, None, :].astype(np.float64) - y[None, y0:y1, :]) ** 2).sum(-1)
        out[x0:x1] = y0 + d.argmin(1)
    return {"out": out}


def _fps_inputs(s, r):
    ptr = _ptr(r, s["N"], s["batch_size"])
    deg = np.diff(ptr)
    # samples per example: out_ptr = cumsum(ceil(deg * ratio)) for some ratio; here any
    # split of M with 1 <= count <= deg (no example runs out of distinct points)
    count = np.ones(s["batch_size"], np.int64)
    for _ in range(s["M"] - s["batch_size"]):
        count[r.choice(np.flatnonzero(count < deg))] += 1
    return {"src": _f32(r, s["N"] * s["dim"]), "ptr": ptr,
            "out_ptr": np.concatenate([[0], np.cumsum(count)]).astype(np.int64),
            "start": (r.random(s["batch_size"]) * deg).astype(np.int64),  # random_start
            "dist": np.full(s["N"], 5e4, np.float32), "out": np.zeros(s["M"], np.int64),
            "dim": _l(s["dim"]), "N": s["N"], "M": s["M"], "batch_size": s["batch_size"]}


def _fps(i, s):
    """fps_cpu.cpp: per example, start at ``start``, then repeatedly take the point farthest
    from those taken."""
    src, out = i["src"].reshape(-1, s["dim"]).astype(np.float64), np.zeros(s["M"], np.int64)
    for b in range(s["batch_size"]):
        (p0, p1), (o0, o1) = i["ptr"][b:b + 2], i["out_ptr"][b:b + 2]
        y, idx = src[p0:p1], int(i["start"][b])
        out[o0] = p0 + idx
        dist = ((y - y[idx]) ** 2).sum(1)
        for m in range(o0 + 1, o1):
            idx = int(dist.argmax())
            out[m] = p0 + idx
            dist = np.minimum(dist, ((y - y[idx]) ** 2).sum(1))
    return {"out": out}


def _knn_inputs(s, r):
    return {"x": _f32(r, s["n"] * s["dim"]), "y": _f32(r, s["m"] * s["dim"]),
            "ptr_x": _ptr(r, s["n"], s["num_examples"]),
            "ptr_y": _ptr(r, s["m"], s["num_examples"]),
            "row": np.zeros(s["m"] * s["k"], np.int64),
            "col": np.full(s["m"] * s["k"], -1, np.int64),  # torch::full(..., -1)
            "cosine": np.bool_(False), **{k: _l(s[k]) for k in ("k", "n", "m", "dim",
                                                                  "num_examples")}}


def _knn(i, s):
    """torch_cluster.knn: for each y, its k nearest x of the same example, nearest first; a
    slot with no point left is -1."""
    x, y = i["x"].reshape(-1, s["dim"]).astype(np.float64), i["y"].reshape(-1, s["dim"])
    k = s["k"]
    row, col = np.repeat(np.arange(s["m"]), k), np.full(s["m"] * k, -1, np.int64)
    for b in range(s["num_examples"]):
        (x0, x1), (y0, y1) = i["ptr_x"][b:b + 2], i["ptr_y"][b:b + 2]
        d = ((y[y0:y1, None, :] - x[None, x0:x1, :]) ** 2).sum(-1)
        for j, n_y in enumerate(range(y0, y1)):
            near = x0 + np.argsort(d[j], kind="stable")[:k]
            col[n_y * k:n_y * k + near.size] = near
    return {"row": row, "col": col}


def _radius_inputs(s, r):
    mnn = s["max_num_neighbors"]
    return {"x": _f32(r, s["n"] * s["dim"]), "y": _f32(r, s["m"] * s["dim"]),
            "ptr_x": _ptr(r, s["n"], s["num_examples"]),
            "ptr_y": _ptr(r, s["m"], s["num_examples"]),
            # the host fills both with -1 (torch::full) and passes r * r
            "row": np.full(s["m"] * mnn, -1, np.int64), "col": np.full(s["m"] * mnn, -1, np.int64),
            "r": np.float32(1.2 ** 2), **{k: _l(s[k]) for k in ("n", "m", "dim", "num_examples",
                                                               "max_num_neighbors")}}


def _radius(i, s):
    """torch_cluster.radius: for each y, the x of its example closer than r, in x order
    (max_num_neighbors is at least every example's size here, so none is dropped)."""
    x, y = i["x"].reshape(-1, s["dim"]).astype(np.float64), i["y"].reshape(-1, s["dim"])
    mnn = s["max_num_neighbors"]
    row, col = np.full(s["m"] * mnn, -1, np.int64), np.full(s["m"] * mnn, -1, np.int64)
    for b in range(s["num_examples"]):
        (x0, x1), (y0, y1) = i["ptr_x"][b:b + 2], i["ptr_y"][b:b + 2]
        for n_y in range(y0, y1):
            near = x0 + np.flatnonzero(((x[x0:x1] - y[n_y]) ** 2).sum(1) < float(i["r"]))
            row[n_y * mnn:n_y * mnn + near.size] = n_y
            col[n_y * mnn:n_y * mnn + near.size] = near
    return {"row": row, "col": col}


# --- torch-scatter ------------------------------------------------------------------------------

def _segment_inputs(s, r):
    b, seg = s["B"], s["N"] // s["B"]
    indptr = np.stack([np.sort(r.integers(0, s["E"] + 1, seg + 1)) for _ in range(b)])
    indptr[:, 0], indptr[:, -1] = 0, s["E"]
    indptr[0, 1] = indptr[0, 2] = min(indptr[0, 1], indptr[0, 2])  # an empty segment
    return {"src_data": _f32(r, b * s["E"]),
            "indptr_info": {"data": indptr.reshape(-1).astype(np.int64),
                            "sizes": [b, seg + 1], "strides": [seg + 1, 1], "dims": 2},
            "out_data": np.zeros(s["N"], np.float32),
            "arg_out_data": np.full(s["N"], s["E"], np.int64),  # torch::full(.., src.size(dim))
            "N": _u64(s["N"]), "E": _u64(s["E"]), "B": s["B"]}


def _segment_max(i, s):
    """segment_max_csr: the max of each segment and its index along the reduced dimension;
    an empty segment gives 0 and index E."""
    src, info = i["src_data"].reshape(s["B"], s["E"]), i["indptr_info"]
    indptr = info["data"].reshape(info["sizes"])
    out, arg = np.zeros(s["N"], np.float32), np.full(s["N"], s["E"], np.int64)
    for b in range(s["B"]):
        for j in range(indptr.shape[1] - 1):
            lo, hi = indptr[b, j], indptr[b, j + 1]
            if hi > lo:
                n = b * (indptr.shape[1] - 1) + j
                out[n], arg[n] = src[b, lo:hi].max(), lo + src[b, lo:hi].argmax()
    return {"out_data": out, "arg_out_data": arg}


# --- causal-conv1d ------------------------------------------------------------------------------

WIDTH = 4  # the traits' kWidth in both --kernel spellings below


def _conv_inputs(s, r):
    b, d, L = s["batch"], s["dim"], s["seqlen"]
    params = {"batch": _i(b), "dim": _i(d), "seqlen": _i(L), "width": _i(WIDTH),
              "silu_activation": np.bool_(True),
              "x_batch_stride": _u32(d * L), "x_c_stride": _u32(L), "x_l_stride": _u32(1),
              "weight_c_stride": _u32(WIDTH), "weight_width_stride": _u32(1),
              "out_batch_stride": _u32(d * L), "out_c_stride": _u32(L), "out_l_stride": _u32(1),
              "x_ptr": _f32(r, b * d * L), "weight_ptr": _f32(r, d * WIDTH, 0.5),
              "bias_ptr": _f32(r, d), "out_ptr": np.zeros(b * d * L, np.float32)}
    if "conv_state_len" in s:  # causal_conv1d_update: conv_state (batch, dim, state_len)
        n = s["conv_state_len"]
        params |= {"conv_state_len": _i(n), "conv_state_batch_stride": _u32(d * n),
                   "conv_state_c_stride": _u32(n), "conv_state_l_stride": _u32(1),
                   "conv_state_ptr": _f32(r, b * d * n)}
    return {"params": params, **s}


def _silu(v):
    return v / (1 + np.exp(-v))


def _conv_fwd(i, s):
    """causal_conv1d_ref with bias and activation='silu'."""
    p, shape = i["params"], (s["batch"], s["dim"], s["seqlen"])
    x = np.pad(p["x_ptr"].reshape(shape).astype(np.float64), ((0, 0), (0, 0), (WIDTH - 1, 0)))
    w = p["weight_ptr"].reshape(s["dim"], WIDTH)
    out = p["bias_ptr"][None, :, None] + sum(
        w[None, :, j, None] * x[:, :, j:j + s["seqlen"]] for j in range(WIDTH))
    return {"params.out_ptr": _silu(out)}


def _conv_update(i, s):
    """causal_conv1d_update_ref (no cache_seqlens): conv over [conv_state, x], and
    conv_state becomes the last state_len columns of that."""
    p, (b, d, L, n) = i["params"], (s["batch"], s["dim"], s["seqlen"], s["conv_state_len"])
    x_new = np.concatenate([p["conv_state_ptr"].reshape(b, d, n),
                            p["x_ptr"].reshape(b, d, L)], -1).astype(np.float64)
    w = p["weight_ptr"].reshape(d, WIDTH)
    out = p["bias_ptr"][None, :, None] + sum(
        w[None, :, j, None] * x_new[:, :, n - (WIDTH - 1) + j:n - (WIDTH - 1) + j + L]
        for j in range(WIDTH))
    return {"params.out_ptr": _silu(out), "params.conv_state_ptr": x_new[:, :, -n:]}


# --- mamba-ssm ----------------------------------------------------------------------------------

def _scan_inputs(s, r):
    b, d, L, n = s["batch"], s["dim"], s["seqlen"], s["dstate"]
    n_chunks = (L + 2048 - 1) // 2048  # selective_scan_fwd's own split
    params = {"batch": _i(b), "dim": _i(d), "seqlen": _i(L), "dstate": _i(n),
              "n_groups": _i(1), "n_chunks": _i(n_chunks), "dim_ngroups_ratio": _i(d),
              "is_variable_B": np.bool_(True), "is_variable_C": np.bool_(True),
              "delta_softplus": np.bool_(True),
              # A (dim, dstate); B, C (batch, groups, dstate, seqlen); u, delta, out (b, d, L)
              "A_d_stride": _u64(n), "A_dstate_stride": _u64(1),
              "B_batch_stride": _u64(n * L), "B_group_stride": _u64(n * L),
              "B_dstate_stride": _u64(L), "C_batch_stride": _u64(n * L),
              "C_group_stride": _u64(n * L), "C_dstate_stride": _u64(L),
              "u_batch_stride": _u64(d * L), "u_d_stride": _u64(L),
              "delta_batch_stride": _u64(d * L), "delta_d_stride": _u64(L),
              "out_batch_stride": _u64(d * L), "out_d_stride": _u64(L),
              "A_ptr": -np.exp(_f32(r, d * n, 0.5)), "B_ptr": _f32(r, b * n * L),
              "C_ptr": _f32(r, b * n * L), "D_ptr": _f32(r, d), "u_ptr": _f32(r, b * d * L),
              "delta_ptr": _f32(r, b * d * L, 0.5), "delta_bias_ptr": _f32(r, d, 0.5),
              "out_ptr": np.zeros(b * d * L, np.float32),
              "x_ptr": np.zeros(b * d * n_chunks * n * 2, np.float32)}
    return {"params": params, **s}


def _selective_scan(i, s):
    """selective_scan_ref with variable B and C (one group), D, delta_bias, softplus."""
    p, (b, d, L, n) = i["params"], (s["batch"], s["dim"], s["seqlen"], s["dstate"])
    u = p["u_ptr"].reshape(b, d, L).astype(np.float64)
    delta = p["delta_ptr"].reshape(b, d, L) + p["delta_bias_ptr"].astype(np.float64)[:, None]
    delta = np.log1p(np.exp(delta))
    A = p["A_ptr"].reshape(d, n).astype(np.float64)
    B, C = p["B_ptr"].reshape(b, n, L), p["C_ptr"].reshape(b, n, L)
    x, ys = np.zeros((b, d, n)), []
    for t in range(L):
        x = np.exp(delta[:, :, t, None] * A) * x + (delta[:, :, t] * u[:, :, t])[..., None] \
            * B[:, None, :, t]
        ys.append(np.einsum("bdn,bn->bd", x, C[:, :, t]))
    return {"params.out_ptr": np.stack(ys, -1) + u * p["D_ptr"][:, None]}


ENTRIES: list[Wild] = [
    Wild("cluster_grid", "torch-cluster", f"{CLUSTER}/grid_cuda.cu", "grid_kernel<float>",
         sizes={"D": 3, "numel": 1000}, held_out=({"D": 2, "numel": 4099}, {"D": 5, "numel": 7}),
         inputs=_grid_inputs, reference=_grid, include=("csrc",), rtol=0, atol=0),
    Wild("cluster_nearest", "torch-cluster", f"{CLUSTER}/nearest_cuda.cu",
         "nearest_kernel<float>",
         sizes={"N": 48, "M": 40, "batch_size": 3, "dim": 3},
         held_out=({"N": 20, "M": 1500, "batch_size": 2, "dim": 2},
                   {"N": 5, "M": 5, "batch_size": 1, "dim": 4}),
         inputs=_nearest_inputs, reference=_nearest, include=("csrc",),
         extra=("--grid", "N", "--block", "1024"), rtol=0, atol=0),
    Wild("cluster_fps", "torch-cluster", f"{CLUSTER}/fps_cuda.cu", "fps_kernel<float>",
         sizes={"N": 300, "M": 20, "batch_size": 2, "dim": 3},
         held_out=({"N": 700, "M": 15, "batch_size": 2, "dim": 2},
                   {"N": 40, "M": 12, "batch_size": 4, "dim": 5}),
         inputs=_fps_inputs, reference=_fps, include=("csrc",),
         extra=("--grid", "batch_size", "--block", "256"), rtol=0, atol=0),
    Wild("cluster_knn", "torch-cluster", f"{CLUSTER}/knn_cuda.cu", "knn_kernel<float>",
         sizes={"k": 4, "n": 100, "m": 60, "dim": 3, "num_examples": 2},
         held_out=({"k": 6, "n": 9, "m": 300, "dim": 2, "num_examples": 3},
                   {"k": 1, "n": 50, "m": 7, "dim": 5, "num_examples": 1}),
         inputs=_knn_inputs, reference=_knn, include=("csrc",),
         extra=("--grid", "ceil_div(m, 256)", "--block", "256"), rtol=0, atol=0),
    Wild("cluster_radius", "torch-cluster", f"{CLUSTER}/radius_cuda.cu", "radius_kernel<float>",
         sizes={"n": 60, "m": 50, "dim": 2, "num_examples": 2, "max_num_neighbors": 64},
         held_out=({"n": 30, "m": 300, "dim": 3, "num_examples": 3, "max_num_neighbors": 32},),
         inputs=_radius_inputs, reference=_radius, include=("csrc",),
         extra=("--grid", "ceil_div(m, 256)", "--block", "256"), rtol=0, atol=0),
    Wild("scatter_segment_csr_max", "torch-scatter", "csrc/cuda/segment_csr_cuda.cu",
         "segment_csr_kernel<float, MAX, 1>",
         sizes={"N": 12, "E": 40, "B": 3}, held_out=({"N": 50, "E": 7, "B": 2},),
         inputs=_segment_inputs, reference=_segment_max, include=("csrc",),
         extra=("--grid", "ceil_div(32 * N, 256)", "--block", "256"), rtol=0, atol=0),
    Wild("conv1d_fwd", "causal-conv1d", "csrc/causal_conv1d_fwd.cu",
         "causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, float, float>>",
         sizes={"batch": 2, "dim": 3, "seqlen": 1000},
         held_out=({"batch": 1, "dim": 5, "seqlen": 36}, {"batch": 3, "dim": 2, "seqlen": 2048}),
         # the launch (grid over params.batch and params.dim, Ktraits::kNThreads,
         # Ktraits::kSmemSize compiled) is read from causal_conv1d_fwd_launch
         inputs=_conv_inputs, reference=_conv_fwd, include=("csrc",), rtol=1e-5, atol=1e-5),
    Wild("conv1d_update", "causal-conv1d", "csrc/causal_conv1d_update.cu",
         "causal_conv1d_update_kernel<Causal_conv1d_update_kernel_traits<64, 4, float, float>, "
         "false>",
         sizes={"batch": 2, "dim": 70, "seqlen": 3, "conv_state_len": 5},
         held_out=({"batch": 3, "dim": 10, "seqlen": 1, "conv_state_len": 3},
                   {"batch": 1, "dim": 130, "seqlen": 4, "conv_state_len": 8}),
         inputs=_conv_inputs, reference=_conv_update, include=("csrc",),
         extra=("--grid", "batch, ceil_div(dim, 64)", "--block", "64"), rtol=1e-5, atol=1e-5),
    Wild("selective_scan_fwd", "mamba-ssm", f"{SCAN}/selective_scan_fwd_fp32.cu",
         "selective_scan_fwd_kernel<Selective_Scan_fwd_kernel_traits<32, 4, 1, false, true, true, "
         "false, float, float>>",
         sizes={"batch": 2, "dim": 4, "seqlen": 100, "dstate": 8},
         held_out=({"batch": 1, "dim": 3, "seqlen": 37, "dstate": 16},
                   {"batch": 2, "dim": 2, "seqlen": 77, "dstate": 4}),
         # the launch, its dynamic shared memory CUB's temp storage plus MAX_DSTATE float2,
         # is read from selective_scan_fwd_launch
         inputs=_scan_inputs, reference=_selective_scan, include=(SCAN,), rtol=1e-4,
         atol=1e-4),
]
