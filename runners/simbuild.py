"""Compile simulator kernels and the simulator host, cached by content hash.

A kernel is one C++ translation unit (shim include + rewritten user source + entry wrapper)
built into a shared library that the host (`kport-simhost`, built once) loads in a child process.
The cache key covers the TU text, every shim/runtime file, the flags and the compiler, so editing
any of them rebuilds; entries live under ``$KPORT_HOME/cache/build``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from runners.settings import Settings, load_settings
from runners.toolchain import Compiler, find_compiler

SIMCORE = Path(__file__).resolve().parent / "simcore"
INCLUDE = SIMCORE / "include"
CUDA_SYSINCLUDE = INCLUDE / "kport" / "cuda" / "sysinclude"
RUNTIME_SOURCES = ("host.cpp", "scheduler.cpp", "checks.cpp", "tsan_atomics.cpp", "fiber.cpp")

KERNEL_FLAGS = (
    "-std=c++20", "-O2", "-fPIC", "-shared", "-fno-exceptions", "-fno-rtti",
    # Round half/bfloat after every operation, as GPUs do (clang keeps excess precision else).
    "-Xclang", "-ffloat16-excess-precision=none", "-Xclang", "-fbfloat16-excess-precision=none",
    "-Wno-unknown-attributes", "-Wno-ignored-attributes", "-Wno-pass-failed", "-ferror-limit=20",
)
# Checked builds call our __tsan_* hooks on every access. -Xclang keeps the driver from linking
# TSan's own runtime; line tables let findings name source lines.
# No vectorizing in checked builds: a vector access spans several simulated threads, and the
# hooks must see each thread's own access to attribute it.
CHECKED_FLAGS = ("-Xclang", "-fsanitize=thread", "-gline-tables-only", "-fno-vectorize",
                 "-fno-slp-vectorize")
HOST_FLAGS = ("-std=c++20", "-O2", "-pthread", "-rdynamic")

_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|note|"
                   r"fatal error): (?P<msg>.*)$", re.M)


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message, located in the user's own file and line."""

    file: str
    line: int
    column: int
    severity: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.severity}: {self.message}"


@dataclass
class Build:
    """Outcome of compiling one kernel: a library path, or diagnostics."""

    ok: bool
    library: Path | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    log: str = ""
    seconds: float = 0.0
    cached: bool = False


def kernel_tail(dialect: str, needs_sync: bool, preamble: str, body: str) -> str:
    """The end of every kernel TU: ``preamble`` (entry helpers), ``kp_entry_body`` running one
    thread with ``body`` (C++ statements over ``void** __kp_a``) and the exported ABI."""
    return (f'#line 1 "kport-entry"\n#define KP_NEEDS_SYNC {int(needs_sync)}\n'
            f'#define KP_DIALECT "{dialect}"\n{preamble}'
            "static inline __attribute__((always_inline)) void kp_entry_body(void** __kp_a) {\n"
            f"{body}\n}}\n#include <kport/kernel_abi.h>\n")


def parse_diagnostics(log: str) -> list[Diagnostic]:
    """Clang's messages as Diagnostic records (errors and warnings; notes are dropped)."""
    found = []
    for m in _DIAG.finditer(log):
        severity = "error" if m["sev"] == "fatal error" else m["sev"]
        if severity == "note":
            continue
        found.append(Diagnostic(m["file"], int(m["line"]), int(m["col"]), severity, m["msg"]))
    return found


@functools.lru_cache(maxsize=1)
def shim_digest() -> str:
    """Hash of every shim and runtime file: a change to any of them invalidates the cache."""
    h = hashlib.sha256()
    for path in sorted(SIMCORE.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(SIMCORE)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def cpu_id() -> str:
    """The host CPU's model and features: builds target the native CPU (zig's default), so a
    home shared between machines must not reuse them across CPUs."""
    import platform

    try:
        info = Path("/proc/cpuinfo").read_text()
        lines = [ln for ln in info.splitlines() if ln.startswith(("model name", "flags"))][:2]
    except OSError:
        lines = []
    return platform.machine() + "|" + "|".join(lines)


def _key(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _compile(compiler: Compiler, args: list[str], out: Path,
             timeout: float) -> tuple[bool, str, bool]:
    """Run the compiler writing to a temp name, then rename: concurrent builds never see halves."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".tmp-", suffix=out.suffix)
    os.close(fd)
    try:
        proc = subprocess.run([*compiler.command, *args, "-o", tmp], capture_output=True,
                              text=True, timeout=timeout)
        ok = proc.returncode == 0
        if ok:
            os.replace(tmp, out)
        return ok, proc.stdout + proc.stderr, False
    except subprocess.TimeoutExpired:
        return False, f"compiler timed out after {timeout:.0f} s", True
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def host_executable(settings: Settings | None = None) -> Path:
    """The simulator host, built once per compiler and runtime version."""
    settings = settings or load_settings()
    compiler = find_compiler(settings.cxx)
    key = _key(shim_digest(), compiler.describe(), cpu_id(), *HOST_FLAGS)
    exe = settings.build_cache_dir / f"host-{key}" / "kport-simhost"
    if exe.is_file():
        return exe
    sources = [str(SIMCORE / "rt" / name) for name in RUNTIME_SOURCES]
    # The first build with ziglang also builds zig's libc++ once (about a minute).
    ok, log, _ = _compile(compiler, [*HOST_FLAGS, *sources, "-ldl"], exe, timeout=900)
    if not ok:
        raise RuntimeError(f"building the simulator host failed (a kport bug):\n{log[-4000:]}")
    return exe


def build_kernel(tu: str, *, checked: bool, dialect: str = "metal",
                 settings: Settings | None = None) -> Build:
    """Compile a kernel TU into a shared library, or return the diagnostics of the failure."""
    settings = settings or load_settings()
    compiler = find_compiler(settings.cxx)
    flags = [*KERNEL_FLAGS, *(CHECKED_FLAGS if checked else ()), f"-I{INCLUDE}"]
    if dialect == "cuda":
        # PTX cvt saturates out-of-range float->int casts and maps NaN to 0; so does this.
        flags += [f"-I{CUDA_SYSINCLUDE}", "-fno-strict-float-cast-overflow"]
    key = _key(tu, shim_digest(), compiler.describe(), cpu_id(), *flags)
    folder = settings.build_cache_dir / key[:2] / key
    library, failed = folder / "kernel.so", folder / "failed.log"
    start = time.perf_counter()
    if library.is_file():
        return Build(True, library, seconds=time.perf_counter() - start, cached=True)
    if failed.is_file():
        log = failed.read_text()
        return Build(False, None, parse_diagnostics(log), log, time.perf_counter() - start, True)
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "kernel.cpp"
    source.write_text(tu)
    ok, log, timed_out = _compile(compiler, [*flags, str(source)], library, timeout=300)
    seconds = time.perf_counter() - start
    if not ok:
        if not timed_out:  # a timeout says nothing about the source: try again next time
            failed.write_text(log)
        return Build(False, None, parse_diagnostics(log), log, seconds)
    return Build(True, library, parse_diagnostics(log), log, seconds)
