"""A ``--kernel`` that names a host function (issue 16): kport ports ``__global__`` kernels, and a
host function is none. The error says what the function runs on the GPU instead: the kernels
it launches (each one kport can port) and the CUB device-wide algorithms it calls (host calls
that launch CUB's own kernels; on a Mac, the MLX operation named does their work).
llama.cpp's ``argsort_f32_i32_cuda_cub`` launches init_indices and init_offsets and sorts with
``cub::DeviceSegmentedSort::SortPairs``, which ``mx.argsort`` along the last axis does.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from agent.translate.tree import _device_code, _fn_name, _walk

# CUB's device-wide algorithms (cub/device/*.cuh), all called from the host
CUB_DEVICE = ("DeviceRadixSort", "DeviceSegmentedRadixSort", "DeviceSegmentedSort",
              "DeviceMergeSort", "DeviceReduce", "DeviceSegmentedReduce", "DeviceScan",
              "DeviceSelect", "DevicePartition", "DeviceHistogram", "DeviceRunLengthEncode",
              "DeviceSpmv", "DeviceAdjacentDifference", "DeviceCopy", "DeviceMemcpy",
              "DeviceFor", "DeviceTransform", "DeviceTopK")
# the MLX operation that does a device-wide algorithm's work, by its method (a pair sort whose
# values are indices is an argsort)
MLX_OPS = {"SortPairs": "mx.argsort", "SortPairsDescending": "mx.argsort",
           "SortKeys": "mx.sort", "SortKeysDescending": "mx.sort", "Sum": "mx.sum",
           "Max": "mx.max", "Min": "mx.min", "ArgMax": "mx.argmax", "ArgMin": "mx.argmin",
           "InclusiveSum": "mx.cumsum", "ExclusiveSum": "mx.cumsum"}
_CALL = re.compile(r"(?<![\w:])(?:::)?(?:cub::)?(" + "|".join(CUB_DEVICE) + r")\s*::\s*(\w+)"
                   r"\s*(?:<[^;()]*>)?\s*\(")


def host_function_error(root: Node, data: bytes, name: str, where: str, kernels: list[str],
                        origin: list[tuple[str, int]] | None = None) -> str | None:
    """The one-line error for ``--kernel name`` when ``name`` is a host function of the source
    (``kernels``: the source's ``__global__`` functions; ``origin``: each line's file and
    line, as SourceView has them); None when no host function has that name."""
    fn = next((n for n in _walk(root) if n.type == "function_definition"
               and _fn_name(n, data) == name and not _device_code(n, data)), None)
    if fn is None:
        return None
    line = fn.start_point[0] + 1
    at = f"{origin[line - 1][0]}:{origin[line - 1][1]}" if origin and line <= len(origin) \
        else f"{where}:{line}"
    body = data[fn.start_byte:fn.end_byte].decode(errors="replace")
    calls: dict[str, list[str]] = {}
    for m in _CALL.finditer(body):
        methods = calls.setdefault(f"cub::{m[1]}", [])
        if m[2] not in methods:
            methods.append(m[2])
    launched = []
    for call in (n for n in _walk(fn) if n.type == "call_expression"):
        callee = call.child_by_field_name("function")
        if callee is not None and any(c.type == "kernel_call_syntax" for c in call.children):
            kernel = data[callee.start_byte:callee.end_byte].decode().split("<")[0].strip()
            if kernel not in launched:
                launched.append(kernel)
    text = f"{at}: {name} is a host function, not a __global__ kernel"
    ops = sorted({MLX_OPS[m] for ms in calls.values() for m in ms if m in MLX_OPS})
    if calls:
        text += (": it calls " + ", ".join(f"{c}::{'/'.join(ms)}" for c, ms in calls.items())
                 + " (CUB device-wide algorithms, called from the host: no kernel kport ports"
                 + (f"; on MLX {' / '.join(ops)} does their work" if ops else "") + ")")
    if launched:
        text += f"{' and' if calls else ': it'} launches {', '.join(launched)}"
    which = "that kernel" if len(launched) == 1 else "one of those kernels" if launched \
        else "a kernel"
    todo = [f"port {which} with --kernel NAME"
            + ("" if launched else f" ({', '.join(kernels) or 'none here'})")]
    if ops:
        todo.append(f"call {' / '.join(ops)} in MLX instead")
    return f"{text}; {', or '.join(todo)}"
