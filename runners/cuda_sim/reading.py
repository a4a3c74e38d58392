"""What nvcc reads of a CUDA source file: its local headers included, the ``#if`` groups the
compiler skips left out, macros as written.

A real kernel sits in a tree: llama.cpp's ``clamp.cu`` includes ``clamp.cuh``, which includes
``common.cuh``, which holds the helpers the kernel calls beside HIP and MUSA branches that a
CUDA build never reads. The translator, the coverage count and the guessed case need the code
the compiler would compile, at the file and line it was written at. ``read_as_compiled``
inlines the local headers (from the file's folder, then each ``-I`` folder, as
``inlined_source`` does for a build) and lets clang's preprocessor in directives-only mode
(``-E -fdirectives-only``: includes and conditionals done, macros neither expanded nor lost)
decide the ``#if`` groups with the simulator's CUDA headers and the ``-D`` macros. The result
keeps only the user's own lines, each with the file and line it came from; system and shim
headers stay out. Clang runs in the jail: the source is outside code.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from runners.cuda_sim import CUDA_HEAD, inlined_source, macro_definitions
from runners.lifetime import temp_folder
from runners.sandbox import Limits, read_jailed
from runners.settings import Settings, load_settings
from runners.simbuild import (
    COMPILE_MEMORY,
    CUDA_SYSINCLUDE,
    INCLUDE,
    KERNEL_FLAGS,
    MAX_PREPROCESSED,
    compile_jail,
    parse_diagnostics,
    shim_digest,
)
from runners.srcrewrite import SourceError
from runners.toolchain import find_compiler

# A line marker of clang's output: `# LINE "FILE" FLAGS`.
_MARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"((?: \d)*)$')
_NOT_FOUND = re.compile(r"^'([^']+)' file not found$")
# host libraries some code includes with quotes (DeepSpeed's `#include "cublas_v2.h"`): read as
# empty like a missing <...> header, never looked for as the user's own
_HOST_LIBRARY = re.compile(r"^(cublas\w*|curand\w*|cufft\w*|cusparse\w*|cusolver\w*|cudnn\w*|"
                           r"nccl\w*|nvToolsExt\w*|cuda_runtime_api|cuda_profiler_api)\.h$|"
                           r"^(nvtx3|torch|ATen|c10|pybind11)/")
MAX_STUBS = 64  # system headers read as empty, at most: more means this is not CUDA code
# The views of the last units read, by the unit (every user file inlined), the shim headers and
# the compiler. One process may read the same file again (a port with the knowledge base reads
# it for the guessed case and for the rules that apply; an MCP or chat session per request),
# and a read is one jailed preprocessor run of ~0.15 s per system header read as empty, plus one.
_READ: dict[str, SourceView] = {}
_READ_KEPT = 32


@dataclass
class SourceView:
    """The code of a file as its compiler reads it. ``text`` holds the user's lines (the file
    and the local headers it includes, in the order the compiler reads them, skipped groups
    and system headers left out); ``origin[i]`` is the (file, line) that ``text``'s line i + 1
    came from; ``files`` each user file as written, by the name its includer used;
    ``stubbed`` the system headers nowhere to be found, read as empty."""

    text: str
    origin: list[tuple[str, int]]
    files: dict[str, str] = field(default_factory=dict)
    stubbed: list[str] = field(default_factory=list)  # system headers read as empty

    def where(self, line: int) -> str:
        """``FILE:LINE`` of ``text``'s line ``line`` (1-based)."""
        if 1 <= line <= len(self.origin):
            file, number = self.origin[line - 1]
            return f"{file}:{number}"
        return f"?:{line}"


def nvcc_options(path: Path, include=(), define=()) -> tuple[str, ...]:
    """The options nvcc would be given for the file ``path``: its own folder first (where
    nvcc looks for a quoted include), then each folder of ``include``, then each ``-D`` of
    ``define`` (NAME or NAME=VALUE); ValueError naming the flag for a folder that does not
    exist or a bad definition."""
    for folder in include:
        if not Path(folder).is_dir():
            raise ValueError(f"-I {folder}: no such folder")
    options = (f"-I{path.parent}", *(f"-I{folder}" for folder in include),
               *(f"-D{d}" for d in define))
    macro_definitions(options)
    return options


def read_as_compiled(code: str, filename: str, options=()) -> SourceView:
    """``code`` (the file ``filename``) as nvcc would read it with ``options`` (``-I`` folders,
    the file's own first, and ``-D`` macros: runners.cuda_sim spellings). A system header
    (``#include <...>``, or a host library's header in quotes: ``_HOST_LIBRARY``) that is nowhere
    to be found (cuBLAS, torch, pybind11: host libraries a kernel's device code never needs) is
    read as empty and listed in ``stubbed``.
    SourceError naming the file and line when the preprocessor stops otherwise (a local
    header it cannot find, an ``#error``)."""
    files: dict[str, str] = {}
    inlined = inlined_source(code, filename, options, texts=files)
    defines = "".join(f"#define {name} {value}\n" for name, value in
                      macro_definitions(options))
    unit = f'{CUDA_HEAD}{defines}#line 1 "{filename}"\n{inlined}\n'
    stubbed: list[str] = []
    settings = load_settings()
    key = hashlib.sha256("\0".join((unit, shim_digest(), settings.cxx or "")).encode()
                         ).hexdigest()
    if key in _READ:
        return _copy(_READ[key], files)
    with temp_folder("kport-read-") as tmp:
        scratch = Path(tmp)
        (scratch / "unit.cpp").write_text(unit)
        for _ in range(MAX_STUBS + 1):
            text, missing = _preprocess(scratch, filename, files, settings)
            if text is not None:
                view = _view(text, files)
                view.stubbed = stubbed
                if len(_READ) >= _READ_KEPT:
                    _READ.pop(next(iter(_READ)))
                _READ[key] = _copy(view, files)
                return view
            if len(stubbed) == MAX_STUBS:
                break
            stub = scratch / "stubs" / missing
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text("")
            stubbed.append(missing)
    raise SourceError(f"{filename}: more than {MAX_STUBS} system headers are missing "
                      f"({', '.join(stubbed[:5])}, ...); is this CUDA code?")


def _copy(view: SourceView, files: dict[str, str]) -> SourceView:
    """``view`` with lists of its own (callers may change them) and ``files`` as read now."""
    return replace(view, origin=list(view.origin), files=dict(files), stubbed=list(view.stubbed))


def _preprocess(scratch: Path, filename: str, files: dict[str, str],
                settings: Settings) -> tuple[str | None, str]:
    """(clang's directives-only output of ``scratch``/unit.cpp, "") or (None, the name of a
    missing system header to read as empty); SourceError for any other failure."""
    compiler = find_compiler(settings.cxx)
    flags = [*KERNEL_FLAGS, f"-I{INCLUDE}", f"-I{CUDA_SYSINCLUDE}", "-idirafter", "stubs",
             "-E", "-fdirectives-only"]
    ran = compile_jail(compiler, scratch).run(
        [*compiler.command, *flags, "unit.cpp", "-o", "unit.ii"], cwd=scratch,
        timeout=settings.compile_timeout, settings=settings,
        limits=Limits(memory=COMPILE_MEMORY, file_size=MAX_PREPROCESSED,
                      cpu_seconds=int(settings.compile_timeout * 2) + 5))
    data = read_jailed(scratch / "unit.ii", MAX_PREPROCESSED)
    if ran.timed_out:
        raise SourceError(f"{filename}: preprocessing timed out after "
                          f"{settings.compile_timeout:g} s (KPORT_COMPILE_TIMEOUT)")
    if ran.returncode == 0 and data is not None:
        return data.decode(errors="replace"), ""
    errors = [d for d in parse_diagnostics(ran.output) if d.severity == "error"]
    if not errors:
        last = (ran.output.strip().splitlines() or ["no message"])[-1]
        raise SourceError(f"{filename}: the preprocessor failed: {last[:300]}")
    first = errors[0]
    m = _NOT_FOUND.match(first.message)
    if m:
        written = files.get(first.file, "").split("\n")
        line = written[first.line - 1] if 0 < first.line <= len(written) else ""
        name = m[1]
        if (f"<{name}>" in line or _HOST_LIBRARY.match(name)) and \
                ".." not in Path(name).parts and not Path(name).is_absolute():
            return None, name
        raise SourceError(f"{first}; pass the folder that holds it with -I DIR")
    raise SourceError(str(first))


_LINE_DIRECTIVE = re.compile(r'^[ \t]*#[ \t]*line[ \t]+(\d+)[ \t]+"([^"]*)"')


def line_origins(text: str, filename: str) -> list[tuple[str, int]]:
    """The (file, line) each line of ``text`` (a file ``filename`` that may hold ``#line N
    "FILE"`` directives, as agent.translate.cuda_closure writes) was written at."""
    origin, file, number = [], filename, 1
    for line in text.split("\n"):
        if m := _LINE_DIRECTIVE.match(line):
            file, number = m[2], int(m[1])
            origin.append((file, number - 1))
            continue
        origin.append((file, number))
        number += 1
    return origin


def _view(preprocessed: str, files: dict[str, str]) -> SourceView:
    """The user's lines of clang's output, each with its origin. A line marker with flag 1
    enters an included file (a system or shim header: the user's own were inlined before) and
    flag 2 returns from it; one without flags is a ``#line`` of the user's text (a file
    inlined by name, or a ``#line`` written in the source itself), which stays the user's."""
    lines, origin = [], []
    file, number, user, stack = "", 0, False, []
    for line in preprocessed.split("\n"):
        m = _MARKER.match(line)
        if m:
            file = m[2].replace('\\"', '"').replace("\\\\", "\\")
            number, flags = int(m[1]), m[3].split()
            if "1" in flags:
                stack.append(user)
                user = file in files
            elif "2" in flags:
                user = stack.pop() if stack else False
            else:
                user = user or file in files
            continue
        if user:
            # trailing blanks go: tree-sitter reads `#define F(x) ` (a space after an empty
            # body) as a macro that swallows the next struct's end (causal-conv1d's ROCM_ONLY)
            lines.append(line.rstrip(" \t"))
            origin.append((file, number))
        number += 1
    return SourceView("\n".join(lines), origin, files)
