"""Static checks on an untrusted Metal candidate (an MLX ``metal_kernel`` body and header),
read as tree-sitter tokens before anything runs. metal_sim compiles the candidate as C++ on
this machine, so anything that could reach the host (declaring libc functions, inline
assembly, includes) or keep state between launches (``static``) is refused. Each check is
named so a verdict says which one fired (a registry, as KernelBench's static checker has).
"""

from __future__ import annotations

from collections.abc import Callable

from runners.srcrewrite import Tok, tokenize

Check = Callable[[list[Tok]], str | None]
CHECKS: dict[str, Check] = {}
_HOST_CALLS = {"system", "popen", "fopen", "open", "write", "read", "exec", "execve", "fork",
               "socket", "connect", "printf", "puts", "fprintf", "getenv", "dlopen", "syscall",
               "remove", "unlink", "malloc", "free", "mmap", "exit", "abort", "kill",
               "clock_gettime", "gettimeofday", "mach_absolute_time", "setrlimit", "ptrace"}


def check(name: str):
    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn
    return register


@check("no_extern")
def _extern(toks: list[Tok]) -> str | None:
    bad = next((t for t in toks if t.text == "extern"), None)
    return f"line {bad.line}: `extern` declares something outside Metal" if bad else None


@check("no_inline_asm")
def _asm(toks: list[Tok]) -> str | None:
    bad = next((t for t in toks if t.text in ("asm", "__asm__", "__asm")), None)
    return f"line {bad.line}: inline assembly" if bad else None


@check("no_includes")
def _includes(toks: list[Tok]) -> str | None:
    bad = next((t for t in toks if t.kind in ("#include", "preproc_include")
                or t.text.startswith("#include")), None)
    return f"line {bad.line}: #include (MLX already includes metal_stdlib)" if bad else None


@check("no_static_state")
def _static(toks: list[Tok]) -> str | None:
    bad = next((t for t in toks if t.text in ("static", "thread_local", "__thread")), None)
    return (f"line {bad.line}: `{bad.text}` state would survive between launches"
            if bad else None)


@check("no_host_calls")
def _host_calls(toks: list[Tok]) -> str | None:
    for i, t in enumerate(toks[:-1]):
        if t.text in _HOST_CALLS and toks[i + 1].text == "(" and \
                (i == 0 or toks[i - 1].text not in (".", "->", "::")):
            return f"line {t.line}: `{t.text}(` is a host call, not Metal"
    return None


@check("no_builtins")
def _builtins(toks: list[Tok]) -> str | None:
    bad = next((t for t in toks if t.text.startswith("__builtin_")
                or t.text.startswith("__sync_")), None)
    return f"line {bad.line}: compiler builtin `{bad.text}`" if bad else None


def static_findings(body: str, header: str = "") -> list[str]:
    """Every check that fires, as ``name: why`` (body lines are the body's own)."""
    out = []
    for where, text in (("body", body), ("header", header)):
        toks = tokenize(text) if text.strip() else []
        for name, fn in CHECKS.items():
            why = fn(toks)
            if why:
                out.append(f"{name}: {where} {why}")
    return out


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
    import ast

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
