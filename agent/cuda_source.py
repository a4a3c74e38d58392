"""The CUDA file a user points kport at, read as nvcc reads it in its own tree.

``kport translate`` and ``kport port`` take the file where it sits, with nvcc's ``-I DIR``
and ``-D NAME[=VALUE]`` (``kport sim`` takes the same flags but compiles the whole file): the
file's folder is searched first, local headers are inlined, ``#if`` groups are decided by
clang with kport's CUDA headers (runners/cuda_sim/reading.py), and host libraries nowhere to
be found are read as empty. The translator reads the result; a guessed case carries the
kernel's device-code closure (agent.translate.cuda_closure), so that it builds without the
host code and its libraries.
"""

from __future__ import annotations

from pathlib import Path

from runners.cuda_sim.reading import SourceView, nvcc_options, read_as_compiled
from runners.errors import KportError


def read_cuda(file: Path, include: list[Path] = (), define: list[str] = ()) -> SourceView:
    """``file`` as nvcc reads it with ``include`` and ``define``; KportError naming the file,
    the flag or the line that stops it."""
    try:
        code = file.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise KportError(f"{file}: cannot read ({err})") from None
    try:
        options = nvcc_options(file, include, define)
    except ValueError as err:
        raise KportError(str(err)) from None
    return read_as_compiled(code, file.name, options)


def stub_note(view: SourceView) -> str:
    """What a reader should know about the system headers read as empty; "" when none."""
    if not view.stubbed:
        return ""
    return (f"read as empty (not found; host libraries a kernel's device code does not "
            f"need): {', '.join(f'<{h}>' for h in view.stubbed)}")


def kernel_not_named(file: Path, text: str) -> KportError:
    """The error for a CUDA file given without --kernel: the kernels it defines, to pick one
    from, or that it defines none (a header, or host code only)."""
    from kb.parse import functions, kernel_names  # lazy: tree-sitter, only for this message

    kernels = kernel_names(functions(text, "cuda"))
    if not kernels:
        return KportError(f"{file}: no __global__ kernel in this file; give the .cu file that "
                          "defines the kernel (with -I for its headers)")
    return KportError(f"{file}: say which kernel with --kernel NAME (or give --case); kernels "
                      f"here: {', '.join(kernels)}")

