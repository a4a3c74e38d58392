"""The kernel variants that validate the cost model on a real GPU (docs/perf-model.md).

Each variant is data: a CUDA file, a kernel, a launch and its arguments at one size. The same
list drives the counting in cuda_sim (evals/perf_validate.py) and the timing on an NVIDIA GPU
(evals/perf_time.py), so both see the same launch. ``count_groups``: how many blocks cuda_sim
runs (a prefix of the grid); every kernel here is grid-uniform, so counters scale by
total blocks / counted blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
VARIANTS_CU = "evals/perf_variants/variants.cu"


@dataclass(frozen=True)
class PerfVariant:
    family: str
    name: str
    file: str  # relative to the repository root
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    # ("buf", dtype, elements, init) with init "rand" | "zero" | "ids:V" | "sorted:V";
    # ("i32"|"f32", value)
    args: tuple = ()
    count_groups: int = 256
    notes: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def groups(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


def make_args(v: PerfVariant, seed: int = 0) -> list:
    """The variant's arguments: numpy arrays for buffers, numpy scalars for values."""
    rng = np.random.default_rng(seed)
    out = []
    for a in v.args:
        if a[0] == "buf":
            _, dtype, n, init = a
            if init.startswith("ids:"):
                out.append(rng.integers(0, int(init[4:]), n, dtype=np.int32))
            elif init.startswith("sorted:"):
                out.append(np.sort(rng.integers(0, int(init[7:]), n, dtype=np.int32)))
            elif init == "zero":
                out.append(np.zeros(n, dtype))
            else:
                out.append(rng.standard_normal(n, dtype=np.float32).astype(dtype))
        elif a[0] == "i32":
            out.append(np.int32(a[1]))
        else:
            out.append(np.float32(a[1]))
    return out


def _buf(n, init="rand", dtype="float32"):
    return ("buf", dtype, n, init)


def _variants() -> list[PerfVariant]:
    out = []
    cu = VARIANTS_CU
    n = 1 << 24  # 64 MiB of floats per buffer
    b = 256
    out.append(PerfVariant("copy", "copy_coalesced", cu, "copy_coalesced", (n // b, 1, 1),
                           (b, 1, 1), (_buf(n), _buf(n, "zero"), ("i32", n))))
    for s in (2, 4, 8, 32):
        out.append(PerfVariant("copy", f"copy_stride{s}", cu, f"copy_strided<{s}>",
                               (n // b, 1, 1), (b, 1, 1), (_buf(n), _buf(n, "zero"), ("i32", n))))
    out.append(PerfVariant("copy", "copy_float2", cu, "copy_float2", (n // 2 // b, 1, 1),
                           (b, 1, 1), (_buf(n), _buf(n, "zero"), ("i32", n // 2))))
    out.append(PerfVariant("copy", "copy_float4", cu, "copy_float4", (n // 4 // b, 1, 1),
                           (b, 1, 1), (_buf(n), _buf(n, "zero"), ("i32", n // 4))))
    out.append(PerfVariant("copy", "copy_offset1", cu, "copy_offset1", (n // b, 1, 1),
                           (b, 1, 1), (_buf(n), _buf(n, "zero"), ("i32", n))))
    for kind in ("smem_interleaved", "smem_sequential", "shuffle", "atomic_warp"):
        for blk in ((128, 512) if kind != "smem_sequential" else (64, 256, 1024)):
            groups = n // (4 * blk)
            out.append(PerfVariant("reduce", f"reduce_{kind}_b{blk}", cu,
                                   f"reduce_{kind}<{blk}>", (groups, 1, 1), (blk, 1, 1),
                                   (_buf(n), _buf(groups, "zero")), count_groups=64))
    r = c = 4096
    tr = (_buf(r * c), _buf(r * c, "zero"), ("i32", r), ("i32", c))
    for name, kernel in (("transpose_naive", "transpose_naive"),
                         ("transpose_naive_rowwrite", "transpose_naive_rowwrite"),
                         ("transpose_smem_conflict", "transpose_smem<0>"),
                         ("transpose_smem_padded", "transpose_smem<1>")):
        out.append(PerfVariant("transpose", name, cu, kernel, (c // 32, r // 32, 1), (32, 8, 1),
                               tr, count_groups=128))
    for pad in (0, 1):
        out.append(PerfVariant("transpose", f"transpose_smem16_pad{pad}", cu,
                               f"transpose_smem16<{pad}>", (c // 16, r // 16, 1), (16, 16, 1),
                               tr, count_groups=256))
    out.append(PerfVariant("transpose", "transpose_corpus016", "corpus/cases/016_transpose_tiled/"
                           "kernel.cu", "transpose_tiled<32, 8>", (c // 32, r // 32, 1),
                           (32, 8, 1), tr, count_groups=128))
    g = 2048
    mm = (_buf(g * g), _buf(g * g), _buf(g * g, "zero"), ("i32", g))
    for t in (8, 16, 32):
        out.append(PerfVariant("gemm", f"gemm_tiled{t}", cu, f"gemm_tiled<{t}>",
                               (g // t, g // t, 1), (t, t, 1), mm, count_groups=4))
    out.append(PerfVariant("gemm", "gemm_naive_swapped", cu, "gemm_naive_swapped",
                           (g // 16, g // 16, 1), (16, 16, 1), mm, count_groups=4))
    mm6 = (_buf(g * g), _buf(g * g), _buf(g * g, "zero"), ("i32", g), ("i32", g), ("i32", g))
    out.append(PerfVariant("gemm", "gemm_corpus018_naive", "corpus/cases/018_gemm_naive/"
                           "kernel.cu", "gemm_naive", (g // 16, g // 16, 1), (16, 16, 1), mm6,
                           count_groups=4))
    out.append(PerfVariant("gemm", "gemm_corpus019_smem16", "corpus/cases/019_gemm_smem_tiled/"
                           "kernel.cu", "gemm_smem_tiled<16>", (g // 16, g // 16, 1),
                           (16, 16, 1), mm6, count_groups=4))
    out.append(PerfVariant("gemm", "gemm_corpus020_regblock",
                           "corpus/cases/020_gemm_register_blocked/kernel.cu",
                           "gemm_register_blocked<64, 64, 8, 4, 4>", (g // 64, g // 64, 1),
                           (256, 1, 1), mm6, count_groups=2))
    blocks = 8192
    for s in (1, 2, 4, 8, 16, 32, 33):
        out.append(PerfVariant("smem_bank", f"smem_stride{s}", cu, f"smem_stride<{s}>",
                               (blocks, 1, 1), (256, 1, 1),
                               (_buf(blocks * 1056), _buf(blocks * 256, "zero")),
                               count_groups=32))
    m = 1 << 24
    out.append(PerfVariant("corpus", "corpus001_saxpy", "corpus/cases/001_saxpy/kernel.cu",
                           "saxpy", (m // 256, 1, 1), (256, 1, 1),
                           (_buf(m), _buf(m), ("f32", 2.5), ("i32", m))))
    out.append(PerfVariant("corpus", "corpus002_gelu", "corpus/cases/002_gelu_tanh/kernel.cu",
                           "gelu_tanh_f32", (m // 4 // 256, 1, 1), (256, 1, 1),
                           (_buf(m), _buf(m, "zero"), ("i32", m))))
    rows, d = 16384, 1024
    out.append(PerfVariant("corpus", "corpus008_row_max", "corpus/cases/008_row_max/kernel.cu",
                           "row_max_warp<4>", (rows // 4, 1, 1), (32, 4, 1),
                           (_buf(rows * d), _buf(rows, "zero"), ("i32", rows), ("i32", d)),
                           count_groups=64))
    out.append(PerfVariant("corpus", "corpus011_softmax", "corpus/cases/011_softmax_naive/"
                           "kernel.cu", "softmax_naive<256>", (rows, 1, 1), (256, 1, 1),
                           (_buf(rows * d), _buf(rows * d, "zero"), ("i32", d)),
                           count_groups=64))
    out.append(PerfVariant("corpus", "corpus013_layernorm", "corpus/cases/013_layernorm_fwd/"
                           "kernel.cu", "layernorm_fwd<128>", (rows, 1, 1), (128, 1, 1),
                           (_buf(rows * d), _buf(d), _buf(d), _buf(rows * d, "zero"),
                            _buf(rows, "zero"), _buf(rows, "zero"), ("i32", d), ("f32", 1e-5)),
                           count_groups=64))
    vocab, dim, toks = 32768, 1024, 16384
    out.append(PerfVariant("corpus", "corpus024_embedding", "corpus/cases/024_embedding_gather/"
                           "kernel.cu", "embedding_gather", (toks, 1, 1), (64, 1, 1),
                           (_buf(vocab * dim), _buf(toks, f"ids:{vocab}", "int32"),
                            _buf(toks * dim, "zero"), ("i32", vocab), ("i32", dim)),
                           count_groups=128))
    nb, cin, cout, hw = 8, 32, 32, 128
    out.append(PerfVariant("corpus", "corpus030_conv2d", "corpus/cases/030_conv2d_3x3/kernel.cu",
                           "conv2d_3x3<16>", (hw // 16, hw // 16, nb * cout), (16, 16, 1),
                           (_buf(nb * cin * hw * hw), _buf(cout * cin * 9), _buf(cout),
                            _buf(nb * cout * hw * hw, "zero"), ("i32", cin), ("i32", cout),
                            ("i32", hw), ("i32", hw)), count_groups=8))
    return out


VARIANTS: list[PerfVariant] = _variants()

HELDOUT_CU = "evals/perf_variants/heldout.cu"


def _heldout() -> list[PerfVariant]:
    """Variants the model never saw: written after runners/perf_model.py and
    kb/rules/arch/perf_chips.toml were fixed, predicted (evals/data/perf_heldout_predictions.json)
    before they were timed, and kept out of VARIANTS, which the model was shaped with. Their
    families all start with ``heldout_``."""
    out = []
    cu = HELDOUT_CU
    r = c = 4096  # 64 MiB grids
    st = (_buf(r * c), _buf(r * c, "zero"), ("i32", r), ("i32", c))
    out.append(PerfVariant("heldout_stencil", "stencil5_global", cu, "stencil5_global",
                           (c // 32, r // 8, 1), (32, 8, 1), st, count_groups=128))
    out.append(PerfVariant("heldout_stencil", "stencil5_tiled8", cu, "stencil5_tiled<8>",
                           (c // 32, r // 8, 1), (32, 8, 1), st, count_groups=128))
    n = 1 << 24
    per, b = 16, 256
    hist = (_buf(n, "ids:256", "int32"), _buf(256, "zero", "int32"))
    for kind in ("global", "shared"):
        out.append(PerfVariant("heldout_hist", f"hist_{kind}_atomic", cu,
                               f"hist_{kind}_atomic<{per}>", (n // (b * per), 1, 1), (b, 1, 1),
                               hist, count_groups=16))
    rows, d = 16384, 1024
    rs = (_buf(rows * d), _buf(rows, "zero"), ("i32", rows), ("i32", d))
    out.append(PerfVariant("heldout_rowsum", "rowsum_warp", cu, "rowsum_warp", (rows // 4, 1, 1),
                           (32, 4, 1), rs, count_groups=64))
    out.append(PerfVariant("heldout_rowsum", "rowsum_thread", cu, "rowsum_thread",
                           (rows // 256, 1, 1), (256, 1, 1), rs, count_groups=2))
    for order, init in (("random", f"ids:{n}"), ("sorted", f"sorted:{n}")):
        out.append(PerfVariant("heldout_gather", f"gather_{order}", cu, "gather_f32",
                               (n // b, 1, 1), (b, 1, 1),
                               (_buf(n), _buf(n, init, "int32"), _buf(n, "zero"), ("i32", n))))
    out.append(PerfVariant("heldout_axpy", "axpy_f32", cu, "axpy_f32", (n // b, 1, 1), (b, 1, 1),
                           (_buf(n), _buf(n), ("f32", 2.5), ("i32", n))))
    out.append(PerfVariant("heldout_axpy", "axpy_f32x4", cu, "axpy_f32x4", (n // 4 // b, 1, 1),
                           (b, 1, 1), (_buf(n), _buf(n), ("f32", 2.5), ("i32", n // 4))))
    h = 2 * n  # 64 MiB of halves
    out.append(PerfVariant("heldout_axpy", "axpy_half", cu, "axpy_half", (h // b, 1, 1),
                           (b, 1, 1), (_buf(h, "rand", "float16"), _buf(h, "rand", "float16"),
                                       ("f32", 0.5), ("i32", h))))
    out.append(PerfVariant("heldout_axpy", "copy_half", cu, "copy_half", (h // b, 1, 1),
                           (b, 1, 1), (_buf(h, "rand", "float16"), _buf(h, "zero", "float16"),
                                       ("i32", h))))
    tr_rows, tr_cols = 2048, 8192  # not square
    tr = (_buf(tr_rows * tr_cols), _buf(tr_rows * tr_cols, "zero"), ("i32", tr_rows),
          ("i32", tr_cols))
    for kind in ("naive", "tiled"):
        out.append(PerfVariant("heldout_transpose", f"transpose32_{kind}", cu,
                               f"transpose32_{kind}", (tr_cols // 32, tr_rows // 32, 1),
                               (32, 32, 1), tr, count_groups=64))
    out.append(PerfVariant("heldout_math", "expf_tanhf_chain16", cu, "expf_tanhf_chain<16>",
                           (n // b, 1, 1), (b, 1, 1), (_buf(n), _buf(n, "zero"), ("i32", n)),
                           count_groups=64))
    batch = 4096  # 64 x 64 matrices: 64 MiB per operand
    out.append(PerfVariant("heldout_bgemm", "bgemm64_smem", cu, "bgemm64_smem", (batch, 1, 1),
                           (256, 1, 1), (_buf(batch * 4096), _buf(batch * 4096),
                                         _buf(batch * 4096, "zero")), count_groups=4))
    return out


HELDOUT_VARIANTS: list[PerfVariant] = _heldout()
