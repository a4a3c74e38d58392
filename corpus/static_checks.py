"""Static checks on untrusted candidates before anything runs.

A Metal candidate (an MLX ``metal_kernel`` body and header) is held to metal_sim's allow-list
(runners/metal_sim/allowlist.py): its own tokens here, for a fast and clear refusal, and its
preprocessed tokens and linked library again whenever metal_sim builds it. A Python candidate (a
generated ``kernel.py``) must call its kernel and nothing that could do the work instead. Each
finding names the check that fired.
"""

from __future__ import annotations

import ast

from runners.metal_sim.allowlist import mlx_parts_problems


def static_findings(body: str, header: str = "") -> list[str]:
    """Every allow-list check the candidate's own text fails, as ``check: file:line: why``
    (lines are the body's and the header's own)."""
    return [f"{p.check}: {p.file}:{p.line}: {p.message}"
            for p in mlx_parts_problems(header, body)]


# Library calls that would do the work in place of the candidate's metal_kernel.
LIBRARY_OPS = {"matmul", "softmax", "conv1d", "conv2d", "conv_general", "einsum", "tensordot",
               "scaled_dot_product_attention", "rms_norm", "layer_norm", "rope", "logsumexp",
               "cumsum", "sort", "argsort", "topk", "take_along_axis", "gather_mm",
               "quantized_matmul", "addmm", "inner", "outer"}


# Imports a kernel.py has no use for: reading or patching the evaluator's memory (case 4, 9)
# and work that outlives the call (case 10).
_INTROSPECTION = {"gc", "inspect", "ctypes", "sys", "builtins", "importlib", "evals", "kb",
                  "agent", "runners.simhost"}
_DEFERRAL = {"threading", "multiprocessing", "concurrent", "asyncio", "subprocess", "os"}


def python_fallback_findings(source: str, filename: str = "kernel.py") -> list[str]:
    """Why a Python candidate (a generated kernel.py) may not be measuring its own kernel: no
    ``metal_kernel`` call, MLX library ops that could replace it, a try/except around it (a
    silent fallback), or torch/numpy math imports. Empty when it passes."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as err:
        return [f"{filename}:{err.lineno}: not valid Python ({err.msg})"]
    out, calls_kernel = [], False
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr == "metal_kernel") or (
                isinstance(node, ast.ImportFrom) and any(a.name == "metal_kernel"
                                                         for a in node.names)):
            calls_kernel = True  # mx.fast.metal_kernel, or the simulator's drop-in
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                node.func, "id", "")
            if name == "metal_kernel":
                calls_kernel = True
            elif name in LIBRARY_OPS:
                out.append(f"{filename}:{node.lineno}: library op `{name}` could do the work "
                           "in place of the metal_kernel")
        elif isinstance(node, ast.Try):
            if any(isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(
                    n.func, "id", "")) in ("metal_kernel", "run") for n in ast.walk(node)):
                out.append(f"{filename}:{node.lineno}: try/except around the kernel: a "
                           "failure could fall back silently")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                node.module or ""]
            top = {m.split(".")[0] for m in mods}
            if top & {"torch", "jax", "tensorflow", "cupy"}:
                out.append(f"{filename}:{node.lineno}: imports {mods[0]}: another framework "
                           "could compute the result")
            if top & _INTROSPECTION:
                out.append(f"{filename}:{node.lineno}: imports {mods[0]}: could read the "
                           "checker's memory or patch it")
            if top & _DEFERRAL:
                out.append(f"{filename}:{node.lineno}: imports {mods[0]}: work could run "
                           "after the call returns")
    if not calls_kernel:
        out.insert(0, f"{filename}: no metal_kernel call: the measured path is not a kernel")
    return out
