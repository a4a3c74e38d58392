"""More of llama.cpp's ggml-cuda kernels for the wild set: normalisations, reductions, im2col,
pooling, padding, convolutions, the RWKV/GLA/Mamba recurrences, softmax and get_rows.

Sizes are the parameters of the host function that launches each kernel (``*_cuda(...)``).
Where no size can express that launch (``ggml_cuda_op_*`` computing it from tensor fields, a
runtime query such as ``nsm``, a loop), the entry names its sizes after the kernel's own
parameters and types the launch the host makes (on a GPU with enough SMs) as ``--grid``,
``--block`` and ``--shared-mem``, as kport asks. References follow ggml's definition of each op
(ggml.h, ggml-cpu/ops.cpp), in float64 where sums are long. Byte strides are those of
contiguous tensors; a name the host and the kernel use with different meanings (tri's ``nb01``:
bytes in the host, elements in the kernel) is given as the host has it.
"""

from __future__ import annotations

import numpy as np

from tests.wild.catalog import CU, GGML_I, _f32, _i, _l
from tests.wild.harness import Wild

F4 = 4  # sizeof(float)


def _silu(v):
    return v / (1 + np.exp(-v))


# --- normalisations and row reductions ----------------------------------------------------------

def _group_norm_inputs(s, r):
    return {"x": _f32(r, s["ne_elements"], 2) + 0.5, "eps": np.float32(1e-6),
            **{k: _i(v) for k, v in s.items()}}


def _group_norm(i, s):
    """ggml_group_norm: each group of group_size consecutive values to mean 0, variance 1."""
    x = i["x"].astype(np.float64).reshape(s["num_groups"], s["group_size"])
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-6)
    return {"dst": y}


def _l2_norm_inputs(s, r):
    n = s["ncols"] * s["nrows"] * s["nchannels"] * s["nsamples"]
    return {"x": _f32(r, n, 3), "eps": np.float32(1e-6),
            **{k: (_i(v) if k == "ncols" else _l(v)) for k, v in s.items()}}


def _l2_norm(i, s):
    """ggml_l2_norm: x / max(||x||, eps) per row (torch.nn.functional.normalize)."""
    x = i["x"].astype(np.float64).reshape(-1, s["ncols"])
    return {"dst": x / np.maximum(np.sqrt((x * x).sum(-1, keepdims=True)), 1e-6)}


def _cross_entropy_inputs(s, r):
    logits = _f32(r, s["nclasses"] * s["k"], 2)
    raw = np.exp(_f32(r, s["nclasses"] * s["k"])).reshape(s["k"], -1)
    labels = (raw / raw.sum(-1, keepdims=True)).astype(np.float32).reshape(-1)
    return {"logits": logits, "labels": labels, "nclasses": _i(s["nclasses"]), "k": _i(s["k"])}


def _cross_entropy(i, s):
    """The kernel's per-row part of ggml_cross_entropy_loss (k rows): -sum(labels *
    log_softmax(logits)) / k for each row (the host sums the rows afterwards)."""
    z = i["logits"].astype(np.float64).reshape(s["k"], -1)
    z = z - z.max(-1, keepdims=True)
    logsm = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return {"dst": -(logsm * i["labels"].reshape(s["k"], -1)).sum(-1) / s["k"]}


# --- im2col, pooling, upscale, pad --------------------------------------------------------------

def _conv_geometry(s):
    return {k: _i(s[k]) for k in ("s0", "s1", "p0", "p1", "d0", "d1")}


def _im2col_inputs(s, r):
    # ggml_cuda_op_im2col passes src1->nb[2]/4 (IH*IW) as IC_IH_IW and nb[3]/4 as IH_IW
    return {"x": _f32(r, s["N"] * s["IC"] * s["IH"] * s["IW"]),
            **{k: _l(v) for k, v in s.items() if k not in ("s0", "s1", "p0", "p1", "d0", "d1")},
            "N_OH": _l(s["N"] * s["OH"]), "KH_KW": _l(s["KH"] * s["KW"]),
            "IC_KH_KW": _l(s["IC"] * s["KH"] * s["KW"]), **_conv_geometry(s)}


def _im2col(i, s):
    """ggml_im2col (2-D): [N, IC, IH, IW] -> [N, OH, OW, IC, KH, KW], zero outside the input."""
    x = i["x"].reshape(s["N"], s["IC"], s["IH"], s["IW"])
    out = np.zeros((s["N"], s["OH"], s["OW"], s["IC"], s["KH"], s["KW"]), np.float32)
    for kh in range(s["KH"]):
        for kw in range(s["KW"]):
            ih = np.arange(s["OH"]) * s["s1"] + kh * s["d1"] - s["p1"]
            iw = np.arange(s["OW"]) * s["s0"] + kw * s["d0"] - s["p0"]
            okh, okw = (ih >= 0) & (ih < s["IH"]), (iw >= 0) & (iw < s["IW"])
            patch = x[:, :, np.clip(ih, 0, s["IH"] - 1)][:, :, :, np.clip(iw, 0, s["IW"] - 1)]
            patch = patch * (okh[:, None] & okw[None, :])  # [N, IC, OH, OW]
            out[..., kh, kw] = patch.transpose(0, 2, 3, 1)
    return {"dst": out}


def _pool_inputs(s, r):
    nc = s["parallel_elements"] // (s["oh"] * s["ow"])
    return {"src": _f32(r, nc * s["ih"] * s["iw"]), "op": np.int32(1),  # GGML_OP_POOL_AVG
            **{k: _i(v) for k, v in s.items()}}


def _pool_avg(i, s):
    """ggml_pool_2d AVG: the mean over the k*k window, padding counted as zeros (ka = k0*k1)."""
    x = i["src"].astype(np.float64).reshape(-1, s["ih"], s["iw"])
    xp = np.pad(x, ((0, 0), (s["ph"], s["kh"] + s["sh"] * s["oh"]),
                    (s["pw"], s["kw"] + s["sw"] * s["ow"])))
    out = np.zeros((x.shape[0], s["oh"], s["ow"]))
    for a in range(s["kh"]):
        for b in range(s["kw"]):
            out += xp[:, a:a + s["sh"] * s["oh"]:s["sh"], b:b + s["sw"] * s["ow"]:s["sw"]]
    return {"dst": out / (s["kh"] * s["kw"])}


def _upscale_src(s):
    """src0's ne from its byte strides (dims 0-2) and ne13 (dim 3 is never scaled here)."""
    return (s["nb01"] // s["nb00"], s["nb02"] // s["nb01"], s["nb03"] // s["nb02"], s["ne13"])


def _upscale_inputs(s, r):
    ne0 = _upscale_src(s)
    ne1 = (s["ne10"], s["ne11"], s["ne12"], s["ne13"])
    return {"x": _f32(r, int(np.prod(ne0))), **{k: _i(v) for k, v in s.items()},
            **{f"sf{d}": np.float32(np.float32(ne1[d]) / np.float32(ne0[d])) for d in range(4)}}


def _upscale(i, s):
    """ggml_upscale NEAREST: dst[i3, i2, i1, i0] = src[i3/sf3, i2/sf2, i1/sf1, i0/sf0] (float
    division, truncated, as ggml computes it)."""
    ne0 = _upscale_src(s)
    x = i["x"].reshape(ne0[::-1])
    idx = [(np.arange(n, dtype=np.float32) / i[f"sf{d}"]).astype(np.int64)
           for d, n in enumerate((s["ne10"], s["ne11"], s["ne12"], s["ne13"]))]
    return {"dst": x[np.ix_(idx[3], idx[2], idx[1], idx[0])]}


_PADS = ("lp0", "rp0", "lp1", "rp1", "lp2", "rp2", "lp3", "rp3")


def _pad_src(s):
    return [s[f"ne{d}"] - s[f"lp{d}"] - s[f"rp{d}"] for d in range(4)]


def _pad_sizes(ne00, pads):
    """pad_f32_cuda's sizes for a contiguous src of shape ``ne00`` (dims 0-3) and ``pads``."""
    out = dict(zip(_PADS, pads, strict=True))
    stride = 1
    for d in range(4):
        out[f"s0{d}"] = stride
        stride *= ne00[d]
        out[f"ne{d}"] = ne00[d] + pads[2 * d] + pads[2 * d + 1]
    return out


def _pad_inputs(s, r):
    return {"src": _f32(r, int(np.prod(_pad_src(s)))), "circular": np.bool_(False),
            **{k: (np.uint64(v) if k.startswith("s0") else _i(v)) for k, v in s.items()}}


def _pad(i, s):
    """ggml_pad_ext: src placed at (lp0, lp1, lp2, lp3) in zeros of shape ne."""
    x = i["src"].reshape(_pad_src(s)[::-1])
    return {"dst": np.pad(x, [(s[f"lp{d}"], s[f"rp{d}"]) for d in (3, 2, 1, 0)])}


# --- convolutions and recurrences -----------------------------------------------------------

def _conv_t_sizes(s0, k, oc, ic, length):
    out = (length - 1) * s0 + k
    return {"s0": s0, "d0": 1, "output_size": out * oc, "src0_ne0": k, "src0_ne1": oc,
            "src0_ne2": ic, "src0_ne3": 1, "src1_ne0": length, "src1_ne1": ic, "src1_ne2": 1,
            "src1_ne3": 1, "dst_ne0": out, "dst_ne1": oc, "dst_ne2": 1, "dst_ne3": 1}


def _conv_t_inputs(s, r):
    return {"src0": _f32(r, s["src0_ne0"] * s["src0_ne1"] * s["src0_ne2"]),
            "src1": _f32(r, s["src1_ne0"] * s["src1_ne1"]), "p0": _i(0),  # the host's p0 = 0
            **{k: _i(v) for k, v in s.items()}}


def _conv_t(i, s):
    """ggml_conv_transpose_1d (p0 = 0, d0 = 1): dst[oc, j*s0 + k] += w[ic, oc, k] * x[ic, j]."""
    k, oc, ic, length = s["src0_ne0"], s["src0_ne1"], s["src0_ne2"], s["src1_ne0"]
    w = i["src0"].astype(np.float64).reshape(ic, oc, k)
    x = i["src1"].astype(np.float64).reshape(ic, length)
    out = np.zeros((oc, s["dst_ne0"]))
    for kk in range(k):
        out[:, kk:kk + (length - 1) * s["s0"] + 1:s["s0"]] += np.einsum("io,il->ol", w[:, :, kk], x)
    return {"dst": out}


def _wkv_inputs(s, r, gla=False):
    tc, hs = s["T"] * s["C"], s["C"] // s["H"]
    out = {"k": _f32(r, tc, 0.5), "v": _f32(r, tc, 0.5), "r": _f32(r, tc, 0.5),
           "td": r.uniform(0.5, 1.0, tc).astype(np.float32),
           "s": _f32(r, s["B"] * s["C"] * hs, 0.5), **{k: _i(v) for k, v in s.items()}}
    if gla:
        out["scale"] = np.float32(0.7)
    else:
        out["tf"] = _f32(r, s["C"], 0.5)
    return out


def _wkv(i, s, gla=False):
    """ggml_rwkv_wkv6 / ggml_gated_linear_attn per sequence and head, state S[key i, value j]:
    wkv6: y_j = sum_i r_i (tf_i k_i v_j + S_ij), then S_ij = S_ij td_i + k_i v_j;
    gla: S_ij = S_ij td_i + k_i v_j, then y_j = scale sum_i r_i S_ij.
    dst = y ([T, C]) followed by the final states ([B, H, hs, hs])."""
    B, T, C, H = s["B"], s["T"], s["C"], s["H"]
    hs, n = C // H, T // B
    k, v, r, td = (i[x].astype(np.float64).reshape(T, H, hs) for x in ("k", "v", "r", "td"))
    state = i["s"].astype(np.float64).reshape(B, H, hs, hs).copy()
    y = np.zeros((T, H, hs))
    for t in range(T):
        b = t // n
        kv = k[t][:, :, None] * v[t][:, None, :]  # [H, i, j]
        if gla:
            state[b] = state[b] * td[t][:, :, None] + kv
            y[t] = i["scale"] * np.einsum("hi,hij->hj", r[t], state[b])
        else:
            tf = i["tf"].astype(np.float64).reshape(H, hs)
            y[t] = np.einsum("hi,hij->hj", r[t], tf[:, :, None] * kv + state[b])
            state[b] = state[b] * td[t][:, :, None] + kv
    return {"dst": np.concatenate([y.reshape(-1), state.reshape(-1)])}


def _ssm_conv_sizes(nr, n_t, n_s, nc=4):
    width = nc - 1 + n_t
    return {"src0_nb0": F4, "src0_nb1": F4 * width, "src0_nb2": F4 * width * nr,
            "src1_nb1": F4 * nc, "dst_nb0": F4, "dst_nb1": F4 * nr, "dst_nb2": F4 * nr * n_t,
            "nc": nc, "nr": nr, "n_t": n_t, "n_s": n_s}


def _ssm_conv_inputs(s, r):
    width = s["nc"] - 1 + s["n_t"]
    return {"src0_ptr": _f32(r, width * s["nr"] * s["n_s"]),
            "src1_ptr": _f32(r, s["nc"] * s["nr"], 0.5), "bias_ptr": _f32(r, s["nr"], 0.5),
            **{k: (_l(v) if k in ("nc", "nr", "n_t", "n_s") else _i(v)) for k, v in s.items()}}


def _ssm_conv(i, s):
    """ggml_ssm_conv, then + bias and silu (the fused path ssm_conv_f32<true, ...> takes):
    dst[seq, t, r] = silu(sum_j x[seq, r, t + j] * w[r, j] + b[r])."""
    nc, nr, n_t = s["nc"], s["nr"], s["n_t"]
    x = i["src0_ptr"].astype(np.float64).reshape(s["n_s"], nr, nc - 1 + n_t)
    w = i["src1_ptr"].astype(np.float64).reshape(nr, nc)
    y = sum(x[:, :, j:j + n_t] * w[None, :, j, None] for j in range(nc))  # [seq, r, t]
    return {"dst_ptr": _silu(y + i["bias_ptr"][None, :, None]).transpose(0, 2, 1)}


# --- tri, acc ----------------------------------------------------------------------------------

def _tri_sizes(ne):
    nb = [F4, F4 * ne[0], F4 * ne[0] * ne[1], F4 * ne[0] * ne[1] * ne[2]]
    return {**{f"ne0{d}": ne[d] for d in range(4)}, **{f"nb0{d}": nb[d] for d in range(4)},
            **{f"nb{d}": nb[d] for d in range(4)}}


def _tri(i, s):
    """ggml_tri LOWER_DIAG: keep src[.., i1, i0] where i0 <= i1, zero elsewhere."""
    x = i["src"].reshape(s["ne03"], s["ne02"], s["ne01"], s["ne00"])
    keep = np.arange(s["ne00"])[None, :] <= np.arange(s["ne01"])[:, None]
    return {"dst": np.where(keep, x, np.float32(0))}


def _acc_sizes(ne, ne1, offset):
    return {"n_elements": int(np.prod(ne)), **{f"ne1{d}": ne1[d] for d in range(4)},
            "s1": ne[0], "s2": ne[0] * ne[1], "s3": ne[0] * ne[1] * ne[2], "offset": offset}


def _acc_inputs(s, r):
    ny = s["ne10"] * s["ne11"] * s["ne12"] * s["ne13"]
    return {"x": _f32(r, s["n_elements"]), "y": _f32(r, ny), "ne": _l(s["n_elements"]),
            "s11": _l(s["s1"]), "s12": _l(s["s2"]), "s13": _l(s["s3"]),
            **{k: _l(v) for k, v in s.items()}}


def _acc(i, s):
    """ggml_acc: dst = x, then the view of dst at ``offset`` with strides s1, s2, s3 += y."""
    dst = i["x"].astype(np.float64).copy()
    i3, i2, i1, i0 = np.meshgrid(*(np.arange(s[f"ne1{d}"]) for d in (3, 2, 1, 0)),
                                 indexing="ij")
    at = s["offset"] + i3 * s["s3"] + i2 * s["s2"] + i1 * s["s1"] + i0
    dst[at.reshape(-1)] += i["y"]
    return {"dst": dst}


# --- softmax, get_rows -------------------------------------------------------------------------

def _softmax_inputs(s, r):
    ncols, ne01, ne02, ne03 = s["ncols"], s["ne01"], s["ne02"], s["ne03"]
    # a causal KQ mask over ncols keys (the last ne01 of them are the rows' own positions)
    causal = np.arange(ncols)[None, :] > np.arange(ne01)[:, None] + ncols - ne01
    mask = np.where(causal, -np.inf, r.uniform(-2, 0, (ne01, ncols))).astype(np.float32)
    log2 = 1 << int(np.floor(np.log2(ne02)))
    max_bias = 8.0
    p = {"nheads": ne02, "n_head_log2": np.uint32(log2), "ncols": ncols,
         "nrows_x": ne01 * ne02 * ne03, "nrows_y": ne01, "ne00": ncols, "ne01": ne01,
         "ne02": ne02, "ne03": ne03, "nb11": F4 * ncols, "nb12": F4 * ncols * ne01,
         "nb13": F4 * ncols * ne01, "ne12": 1, "ne13": 1, "scale": np.float32(0.5),
         "max_bias": np.float32(max_bias), "m0": np.float32(2.0 ** (-max_bias / log2)),
         "m1": np.float32(2.0 ** (-max_bias / 2 / log2))}
    p = {k: (v if isinstance(v, np.generic) else np.int64(v)) for k, v in p.items()}
    return {"x": _f32(r, ncols * ne01 * ne02 * ne03, 2), "mask": mask.reshape(-1),
            "sinks": _f32(r, ne02), "p": p, **s}


def _softmax(i, s):
    """ggml_soft_max_ext with ALiBi and attention sinks: softmax over the row and the head's
    sink of x*scale + slope(head)*mask, slope = m0^(h+1) (h < n_head_log2) or
    m1^(2(h - n_head_log2) + 1)."""
    p = i["p"]
    ne01, ne02, ncols = s["ne01"], s["ne02"], s["ncols"]
    log2 = int(p["n_head_log2"])
    h = np.arange(ne02)
    slope = np.where(h < log2, float(p["m0"]) ** (h + 1), float(p["m1"]) ** (2 * (h - log2) + 1))
    x = i["x"].astype(np.float64).reshape(-1, ne02, ne01, ncols)
    mask = i["mask"].astype(np.float64).reshape(ne01, ncols)
    with np.errstate(invalid="ignore"):
        v = x * float(p["scale"]) + slope[None, :, None, None] * mask[None, None]
    sink = i["sinks"].astype(np.float64)[None, :, None, None]
    m = np.maximum(v.max(-1, keepdims=True), sink)
    e = np.exp(v - m)
    return {"dst": e / (e.sum(-1, keepdims=True) + np.exp(sink - m))}


def _fastdiv(d: int) -> dict:
    """init_fastdiv_values(d) (common.cuh): <mp, L, d>."""
    shift = 0
    while shift < 32 and (1 << shift) < d:
        shift += 1
    mp = ((1 << 32) * ((1 << shift) - d) // d + 1) & 0xFFFFFFFF
    return {"x": np.uint32(mp), "y": np.uint32(shift), "z": np.uint32(d)}


def _get_rows_sizes(ne00, ne01, ne10, ne11, ne12):
    """get_rows_cuda_float's sizes for contiguous src0 [ne00, ne01, ne11, ne12], rows
    [ne10, ne11, ne12] and dst [ne00, ne10, ne11, ne12]."""
    return {"ne00": ne00, "nb01": F4 * ne00, "nb02": F4 * ne00 * ne01,
            "nb03": F4 * ne00 * ne01 * ne11, "ne10": ne10, "ne11": ne11, "ne12": ne12,
            "nb10": 4, "nb11": 4 * ne10, "nb12": 4 * ne10 * ne11, "nb1": F4 * ne00,
            "nb2": F4 * ne00 * ne10, "nb3": F4 * ne00 * ne10 * ne11}


def _get_rows_inputs(s, r):
    ne01 = s["nb02"] // s["nb01"]
    u = np.uint64
    return {"src0_ptr": _f32(r, s["ne00"] * ne01 * s["ne11"] * s["ne12"]),
            "src1_ptr": r.integers(0, ne01, s["ne10"] * s["ne11"] * s["ne12"]).astype(np.int32),
            "ne12_fdv": _fastdiv(s["ne12"]),
            "s1": u(s["nb1"] // 4), "s2": u(s["nb2"] // 4), "s3": u(s["nb3"] // 4),
            "s10": u(s["nb10"] // 4), "s11": u(s["nb11"] // 4), "s12": u(s["nb12"] // 4),
            **{k: (u(v) if k.startswith("nb") else _l(v)) for k, v in s.items()}}


def _get_rows(i, s):
    """ggml_get_rows: dst[i12, i11, i10, :] = src0[i12, i11, rows[i12, i11, i10], :]."""
    ne01 = s["nb02"] // s["nb01"]
    x = i["src0_ptr"].reshape(s["ne12"], s["ne11"], ne01, s["ne00"])
    rows = i["src1_ptr"].reshape(s["ne12"], s["ne11"], s["ne10"])
    b3, b2 = np.meshgrid(np.arange(s["ne12"]), np.arange(s["ne11"]), indexing="ij")
    return {"dst_ptr": x[b3[..., None], b2[..., None], rows]}


# --- argsort on the CUB path (-D GGML_CUDA_USE_CUB): the bitonic kernel it still takes for rows
# of at most 1024, and the index and offset kernels argsort_f32_i32_cuda_cub launches around
# cub::DeviceSegmentedSort (a host function: not a kernel kport ports, docs/translate.md)

CUB = ("-D", "GGML_CUDA_USE_CUB")


def _distinct_rows(s, r):
    """Rows of distinct values (integers plus a fraction under 0.5: no ties, for which the
    bitonic network's order is its own)."""
    n = s["ncols"]
    rows = [r.permutation(n) + r.uniform(0, 0.5, n) - n / 2 for _ in range(s["nrows"])]
    return np.concatenate(rows).astype(np.float32)


def _argsort(i, s, descending):
    """ggml_argsort: each row's indices in ascending (descending) order of its values."""
    x = i["x"].astype(np.float64).reshape(s["nrows"], s["ncols"])
    return {"dst": np.argsort(-x if descending else x, axis=-1, kind="stable").astype(np.int32)}


ENTRIES: list[Wild] = [
    Wild("group_norm_32", "llama.cpp", f"{CU}/norm.cu", "group_norm_f32<32>",
         sizes={"num_groups": 8, "group_size": 300, "ne_elements": 2400},
         held_out=({"num_groups": 5, "group_size": 77, "ne_elements": 385},
                   {"num_groups": 13, "group_size": 1000, "ne_elements": 13000}),
         inputs=_group_norm_inputs, reference=_group_norm, include=GGML_I,
         rtol=1e-4, atol=1e-4),
    Wild("group_norm_1024", "llama.cpp", f"{CU}/norm.cu", "group_norm_f32<1024>",
         sizes={"num_groups": 3, "group_size": 1500, "ne_elements": 4500},
         held_out=({"num_groups": 2, "group_size": 2049, "ne_elements": 4098},
                   {"num_groups": 5, "group_size": 1024, "ne_elements": 5120}),
         inputs=_group_norm_inputs, reference=_group_norm, include=GGML_I,
         rtol=1e-4, atol=1e-4),
    # sum_rows_f32_cuda picks the block from the SM count: 512 threads (its first launch) while
    # nrows < 2 * nsm
    Wild("sum_rows", "llama.cpp", f"{CU}/sumrows.cu", "reduce_rows_f32<false>",
         sizes={"ncols": 3000, "nrows": 9}, held_out=({"ncols": 517, "nrows": 31},
                                                      {"ncols": 5, "nrows": 3}),
         inputs=lambda s, r: {"x_ptr": _f32(r, s["ncols"] * s["nrows"]),
                              "ncols": _i(s["ncols"]), "nrows": _i(s["nrows"])},
         reference=lambda i, s: {"dst_ptr": i["x_ptr"].astype(np.float64).reshape(
             s["nrows"], -1).sum(-1)},
         include=GGML_I, rtol=1e-5, atol=1e-4),
    Wild("l2_norm", "llama.cpp", f"{CU}/norm.cu", "l2_norm_f32<32>",
         sizes={"ncols": 700, "nrows": 3, "nchannels": 2, "nsamples": 2, "stride_row": 700,
                "stride_channel": 2100, "stride_sample": 4200},
         held_out=({"ncols": 513, "nrows": 5, "nchannels": 1, "nsamples": 3, "stride_row": 513,
                    "stride_channel": 2565, "stride_sample": 2565},
                   {"ncols": 1000, "nrows": 1, "nchannels": 4, "nsamples": 1,
                    "stride_row": 1000, "stride_channel": 1000, "stride_sample": 4000}),
         inputs=_l2_norm_inputs, reference=_l2_norm, include=GGML_I, rtol=1e-4, atol=1e-5),
    # ggml_cuda_argmax: one block per row of min(1024, ncols rounded up to a warp) threads
    Wild("argmax", "llama.cpp", f"{CU}/argmax.cu", "argmax_f32",
         sizes={"ncols": 1000, "nrows": 12},
         held_out=({"ncols": 33, "nrows": 7}, {"ncols": 2500, "nrows": 3}),
         inputs=lambda s, r: {"x": _f32(r, s["ncols"] * s["nrows"]), "ncols": _l(s["ncols"]),
                              "nrows": _l(s["nrows"])},
         reference=lambda i, s: {"dst": i["x"].reshape(s["nrows"], -1).argmax(-1).astype(
             np.int32)},
         include=GGML_I,
         extra=("--grid", "nrows", "--block", "min(1024, ceil_div(ncols, 32) * 32)")),
    # the host sizes the grid by the SM count: min(4*nsm, ceil(ne/128)) blocks of dk = 128
    # values (ceil(k/dk) with ne < 512*nsm); the user types that launch
    Wild("count_equal", "llama.cpp", f"{CU}/count-equal.cu", "count_equal<int>",
         sizes={"k": 5000, "dk": 128}, held_out=({"k": 3001, "dk": 128}, {"k": 70001, "dk": 256}),
         inputs=lambda s, r: {"x": r.integers(0, 4, s["k"]).astype(np.int32),
                              "y": r.integers(0, 4, s["k"]).astype(np.int32),
                              "k": _l(s["k"]), "dk": _l(s["dk"])},
         reference=lambda i, s: {"dst": np.array([np.sum(i["x"] == i["y"])], np.int64)},
         include=GGML_I, extra=("--grid", "ceil_div(k, dk)", "--block", "32"), rtol=0, atol=0),
    Wild("cross_entropy_loss", "llama.cpp", f"{CU}/cross-entropy-loss.cu",
         "cross_entropy_loss_f32<true>", sizes={"nclasses": 500, "k": 16},
         held_out=({"nclasses": 37, "k": 5}, {"nclasses": 2001, "k": 3}),
         inputs=_cross_entropy_inputs, reference=_cross_entropy, include=GGML_I,
         extra=("--grid", "k", "--block", "32", "--shared-mem", "nclasses * 4"),
         rtol=1e-4, atol=1e-5),
    Wild("im2col", "llama.cpp", f"{CU}/im2col.cu", "im2col_kernel<float>",
         sizes={"IW": 20, "IH": 16, "OW": 20, "OH": 16, "KW": 3, "KH": 3, "IC": 4, "N": 2,
                "IC_IH_IW": 320, "IH_IW": 1280, "s0": 1, "s1": 1, "p0": 1, "p1": 1, "d0": 1,
                "d1": 1},
         held_out=({"IW": 15, "IH": 11, "OW": 7, "OH": 10, "KW": 3, "KH": 2, "IC": 3, "N": 3,
                    "IC_IH_IW": 165, "IH_IW": 495, "s0": 2, "s1": 1, "p0": 1, "p1": 2,
                    "d0": 2, "d1": 5},),
         inputs=_im2col_inputs, reference=_im2col, include=GGML_I),
    Wild("pool2d_avg", "llama.cpp", f"{CU}/pool2d.cu", "pool2d_nchw_kernel<float, float>",
         sizes={"ih": 16, "iw": 20, "oh": 8, "ow": 10, "kh": 3, "kw": 3, "sh": 2, "sw": 2,
                "ph": 1, "pw": 1, "parallel_elements": 480},
         held_out=({"ih": 13, "iw": 9, "oh": 14, "ow": 5, "kh": 2, "kw": 3, "sh": 1, "sw": 2,
                    "ph": 1, "pw": 1, "parallel_elements": 350},),
         inputs=_pool_inputs, reference=_pool_avg, include=GGML_I, rtol=1e-5, atol=1e-6),
    Wild("upscale_nearest", "llama.cpp", f"{CU}/upscale.cu", "upscale_f32",
         sizes={"nb00": 4, "nb01": 48, "nb02": 384, "nb03": 1152, "ne10": 24, "ne11": 16,
                "ne12": 3, "ne13": 2},
         held_out=({"nb00": 4, "nb01": 20, "nb02": 80, "nb03": 160, "ne10": 7, "ne11": 6,
                    "ne12": 4, "ne13": 3},),
         inputs=_upscale_inputs, reference=_upscale, include=GGML_I),
    Wild("pad", "llama.cpp", f"{CU}/pad.cu", "pad_f32",
         sizes=_pad_sizes((10, 6, 3, 2), (2, 3, 1, 2, 1, 1, 1, 1)),
         held_out=(_pad_sizes((7, 5, 2, 1), (1, 4, 3, 1, 2, 1, 1, 2)),),
         inputs=_pad_inputs, reference=_pad, include=GGML_I),
    Wild("conv_transpose_1d", "llama.cpp", f"{CU}/conv-transpose-1d.cu",
         "conv_transpose_1d_kernel", sizes=_conv_t_sizes(2, 5, 6, 4, 40),
         held_out=(_conv_t_sizes(3, 4, 3, 5, 17), _conv_t_sizes(1, 7, 8, 2, 30)),
         inputs=_conv_t_inputs, reference=_conv_t, include=GGML_I, rtol=1e-5, atol=1e-5),
    # C / H is the head size, which must equal the instantiation's block size (64 or 128)
    Wild("rwkv_wkv6", "llama.cpp", f"{CU}/wkv.cu", "rwkv_wkv_f32<64>",
         sizes={"B": 2, "T": 8, "C": 128, "H": 2},
         held_out=({"B": 3, "T": 9, "C": 192, "H": 3}, {"B": 1, "T": 5, "C": 64, "H": 1}),
         inputs=_wkv_inputs, reference=_wkv, include=GGML_I,
         extra=("--grid", "B * H", "--block", "C // H"), rtol=1e-4, atol=1e-4),
    Wild("gated_linear_attn", "llama.cpp", f"{CU}/gla.cu", "gated_linear_attn_f32<128>",
         sizes={"B": 2, "T": 6, "C": 256, "H": 2},
         held_out=({"B": 1, "T": 5, "C": 128, "H": 1}, {"B": 3, "T": 9, "C": 384, "H": 3}),
         inputs=lambda s, r: _wkv_inputs(s, r, gla=True),
         reference=lambda i, s: _wkv(i, s, gla=True), include=GGML_I,
         extra=("--grid", "B * H", "--block", "C // H"), rtol=1e-4, atol=1e-4),
    # nr % 128 == 0 and n_t <= 32 (longer sequences take ssm_conv_long_token_f32)
    Wild("ssm_conv", "llama.cpp", f"{CU}/ssm-conv.cu", "ssm_conv_f32<true, 128, 4>",
         sizes=_ssm_conv_sizes(256, 20, 3),
         held_out=(_ssm_conv_sizes(384, 7, 2), _ssm_conv_sizes(128, 32, 1)),
         inputs=_ssm_conv_inputs, reference=_ssm_conv, include=GGML_I, rtol=1e-5, atol=1e-5),
    Wild("tri_lower_diag", "llama.cpp", f"{CU}/tri.cu", "tri_kernel<float, true, 1>",
         sizes=_tri_sizes((40, 40, 3, 2)),
         held_out=(_tri_sizes((17, 17, 5, 1)), _tri_sizes((30, 20, 2, 2))),
         inputs=lambda s, r: {"src": _f32(r, s["ne00"] * s["ne01"] * s["ne02"] * s["ne03"]),
                              **{k: _l(v) for k, v in s.items()}},
         reference=_tri, include=GGML_I),
    Wild("acc", "llama.cpp", f"{CU}/acc.cu", "acc_f32",
         sizes=_acc_sizes((20, 12, 3, 2), (7, 5, 2, 2), 23),
         held_out=(_acc_sizes((9, 7, 4, 1), (4, 3, 2, 1), 21),
                   _acc_sizes((33, 10, 2, 3), (33, 4, 1, 2), 165)),
         inputs=_acc_inputs, reference=_acc, include=GGML_I, rtol=1e-6, atol=1e-6),
    # the block is the smallest power of two >= ncols (a loop in the host): 512 for these ncols
    Wild("soft_max", "llama.cpp", f"{CU}/softmax.cu", "soft_max_f32<true, 0, 0, float>",
         sizes={"ncols": 300, "ne01": 7, "ne02": 6, "ne03": 2},
         held_out=({"ncols": 477, "ne01": 3, "ne02": 4, "ne03": 1},
                   {"ncols": 257, "ne01": 9, "ne02": 5, "ne03": 3}),
         inputs=_softmax_inputs, reference=_softmax, include=GGML_I,
         extra=("--grid", "ne01, ne02, ne03", "--block", "512",
                "--shared-mem", "(ceil_div(ncols, 32) * 32 + 32) * 4"),
         rtol=1e-4, atol=1e-6, note="struct soft_max_params p"),
    Wild("get_rows", "llama.cpp", f"{CU}/getrows.cu", "k_get_rows_float<float, float>",
         sizes=_get_rows_sizes(301, 20, 8, 3, 2),
         held_out=(_get_rows_sizes(77, 9, 5, 2, 3), _get_rows_sizes(513, 4, 11, 1, 1)),
         inputs=_get_rows_inputs, reference=_get_rows, include=GGML_I,
         note="uint3 ne12_fdv (fastdiv values)"),
    Wild("argsort_asc", "llama.cpp", f"{CU}/argsort.cu", "k_argsort_f32_i32<GGML_SORT_ORDER_ASC>",
         sizes={"ncols": 300, "nrows": 5},
         held_out=({"ncols": 1024, "nrows": 3}, {"ncols": 33, "nrows": 7},
                   {"ncols": 1, "nrows": 2}),
         inputs=lambda s, r: {"x": _distinct_rows(s, r), "ncols": _i(s["ncols"]),
                              "nrows": _i(s["nrows"])},
         reference=lambda i, s: _argsort(i, s, False), include=GGML_I, extra=CUB,
         rtol=0, atol=0),
    Wild("argsort_desc", "llama.cpp", f"{CU}/argsort.cu",
         "k_argsort_f32_i32<GGML_SORT_ORDER_DESC>", sizes={"ncols": 700, "nrows": 4},
         held_out=({"ncols": 129, "nrows": 9}, {"ncols": 1000, "nrows": 2}),
         inputs=lambda s, r: {"x": _distinct_rows(s, r), "ncols": _i(s["ncols"]),
                              "nrows": _i(s["nrows"])},
         reference=lambda i, s: _argsort(i, s, True), include=GGML_I, extra=CUB,
         rtol=0, atol=0),
    # the values of cub::DeviceSegmentedSort::SortPairs: each row's column indices
    Wild("argsort_init_indices", "llama.cpp", f"{CU}/argsort.cu", "init_indices",
         sizes={"ncols": 3000, "nrows": 5},
         held_out=({"ncols": 1025, "nrows": 3}, {"ncols": 100, "nrows": 40}),
         inputs=lambda s, r: {"ncols": _i(s["ncols"]), "nrows": _i(s["nrows"])},
         reference=lambda i, s: {"indices": np.tile(np.arange(s["ncols"]), s["nrows"])},
         include=GGML_I, extra=CUB, rtol=0, atol=0),
    # its segment offsets (nrows + 1 of them: row r is [offsets[r], offsets[r + 1]))
    Wild("argsort_init_offsets", "llama.cpp", f"{CU}/argsort.cu", "init_offsets",
         sizes={"ncols": 3000, "nrows": 300},
         held_out=({"ncols": 1025, "nrows": 255}, {"ncols": 7, "nrows": 1}),
         inputs=lambda s, r: {"ncols": _i(s["ncols"]), "nrows": _i(s["nrows"])},
         reference=lambda i, s: {"offsets": np.arange(s["nrows"] + 1) * s["ncols"]},
         include=GGML_I, extra=CUB, rtol=0, atol=0),

]
