"""`kport perf FILE.metal`: the launch and inputs of a Metal kernel, scored by
runners/perf_metal.py.

Two kinds of file: a standalone library (``kernel void K(... [[buffer(i)]] ...)``), launched
with ``--grid`` threadgroups of ``--block`` threads, its pointer buffers sized by ``--shape
NAME=LEN`` and its ``constant T&`` values by ``--size NAME=V``; or an MLX kernel body (what
``mx.fast.metal_kernel`` takes), which needs ``--case DIR``: the case's [metal] section names
its inputs, outputs and launch, and FILE stands in for the case's port.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from agent.case_guess import load_case_arg, with_sizes
from agent.perf_metal import score_metal_function
from corpus.cases import CaseError
from corpus.check import kernel_name, launch_dims, make_inputs, run_metal
from kb.perf_chips import perf_chip
from runners.errors import KportError
from runners.perf_metal import NotScored, kernel_params, metal_launch, predict_counted
from runners.sizeexpr import evaluate

_KERNEL = re.compile(r"\bkernel\s+void\b")
# element types of buffers a standalone kernel may take, by their Metal spelling
_DTYPES = {"float": np.float32, "half": np.float16, "int": np.int32, "uint": np.uint32,
           "int32_t": np.int32, "uint32_t": np.uint32, "short": np.int16, "ushort": np.uint16,
           "char": np.int8, "uchar": np.uint8, "int8_t": np.int8, "uint8_t": np.uint8,
           "bool": np.bool_, "long": np.int64, "ulong": np.uint64, "int64_t": np.int64,
           "uint64_t": np.uint64, "bfloat": np.uint16}


def is_library(text: str) -> bool:
    """Whether a .metal text is a standalone library (it declares a ``kernel void``)."""
    return bool(_KERNEL.search(text))


def _element(type_text: str, where: str) -> tuple[type, int]:
    """(numpy dtype, lanes) of a parameter type such as ``device const float4*``."""
    words = re.sub(r"\b(device|constant|const|threadgroup|thread|volatile|restrict)\b", " ",
                   type_text).replace("*", " ").replace("&", " ").split()
    base = words[-1] if words else ""
    m = re.fullmatch(r"([a-z_0-9]+?)([234])?", base)
    if not m or m[1] not in _DTYPES:
        raise KportError(f"{where}: type `{type_text}` is not one kport perf can make inputs "
                         f"for ({', '.join(_DTYPES)}, and their 2/3/4 vectors)")
    return _DTYPES[m[1]], int(m[2] or 1)


def _library_buffers(params, sizes: dict, shapes: dict, where: str) -> dict[int, object]:
    """Inputs for each [[buffer(i)]] of a standalone kernel: pointers sized by --shape,
    ``constant T&`` values from --size; normal floats, zero integers."""
    rng = np.random.default_rng(0)
    out = {}
    for p in params:
        if p.buffer_index is None:
            continue
        dtype, lanes = _element(p.type, f"{where}: parameter `{p.name}`")
        if p.type.rstrip().endswith("&"):
            if p.name not in sizes:
                raise KportError(f"{where}: `{p.name}` is a constant value: pass --size "
                                 f"{p.name}=V")
            out[p.buffer_index] = np.array([sizes[p.name]] * lanes, dtype)[0] if lanes == 1 \
                else np.array([sizes[p.name]] * lanes, dtype)
            continue
        if p.name not in shapes:
            raise KportError(f"{where}: buffer `{p.name}` needs a length: pass --shape "
                             f"{p.name}=N (elements; a number or an expression over --size)")
        n = math.prod(int(evaluate(d, sizes, f"--shape {p.name}")) for d in shapes[p.name])
        n *= lanes
        out[p.buffer_index] = (rng.standard_normal(n).astype(dtype) if np.issubdtype(
            dtype, np.floating) else np.zeros(n, dtype))
    return out


def predict_library(file: Path, text: str, kernel: str | None, chip: str, sizes: dict,
                    shapes: dict, grid, block, shared_mem: str | None) -> dict:
    """A standalone .metal kernel's prediction (as perf_cli prints it)."""
    if not kernel:
        raise KportError(f"{file}: say which kernel with --kernel NAME")
    if grid is None or block is None:
        raise KportError(f"{file}: a .metal kernel's launch comes from --grid (threadgroups) "
                         "and --block (threads per threadgroup), or from --case")
    g = [*launch_dims(grid, sizes, "--grid"), 1, 1][:3]
    b = [*launch_dims(block, sizes, "--block"), 1, 1][:3]
    try:
        params = kernel_params(text, kernel, file.name)
    except (ValueError, SyntaxError) as err:
        raise KportError(f"{file}: {err}") from None
    memory = int(evaluate(shared_mem, sizes, "--shared-mem")) if shared_mem else 0
    buffers = _library_buffers(params, sizes, shapes, str(file))
    try:
        pred = score_metal_function(text, kernel, buffers, filename=file.name,
                                    threadgroups=g, threadgroup=b, threadgroup_memory=memory,
                                    chip=chip)
    except NotScored as err:
        raise KportError(f"{file}: {err}; fix the kernel or its sizes first") from None
    return {"kernel": kernel, "sizes": sizes, "grid": g, "block": b, "prediction": pred}


def predict_body(file: Path, text: str, case_dir: Path | None, chip: str, sizes: dict,
                 grid, block, staging: Path) -> dict:
    """An MLX kernel body's prediction at its case's inputs and launch (FILE as the port)."""
    if case_dir is None:
        raise KportError(f"{file} is an MLX kernel body (no `kernel void`): pass --case DIR "
                         "whose [metal] section names its inputs, outputs and launch")
    try:
        case = with_sizes(load_case_arg(case_dir, staging / "case"), sizes)
    except CaseError as err:
        raise KportError(str(err)) from None
    if case.metal is None:
        raise KportError(f"{case.folder / 'case.toml'}: no [metal] section; add one "
                         "(docs/corpus.md) to say how the Metal kernel is launched")
    updates = {"source": str(file.resolve())}
    if grid is not None and block is not None:  # --grid threadgroups of --block threads
        updates |= {"grid": [f"({x}) * ({y})" for x, y in zip(grid, block, strict=False)],
                    "threadgroup": list(block)}
    case = case.model_copy(update={"metal": case.metal.model_copy(update=updates)})
    sizes = dict(case.sizes)
    where = f"{case.folder / 'case.toml'}: metal"
    threads = [*launch_dims(case.metal.grid, sizes, where + ".grid"), 1, 1][:3]
    tg = [*launch_dims(case.metal.threadgroup, sizes, where + ".threadgroup"), 1, 1][:3]
    _, record = run_metal(case, sizes, make_inputs(case, sizes, 0), count=True)
    launch = metal_launch(threads, tg)
    try:
        pred = predict_counted(record, launch, perf_chip(chip), text,
                               f"metal_kernel {kernel_name(case)}")
    except NotScored as err:
        raise KportError(f"{file}: {err}; fix the kernel or its sizes first") from None
    groups = [-(-t // max(1, min(b, t))) for t, b in zip(threads, tg, strict=True)]
    return {"kernel": kernel_name(case), "sizes": sizes, "grid": groups, "block": tg,
            "prediction": pred}
