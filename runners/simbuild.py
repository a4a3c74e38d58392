"""Compile simulator kernels and the simulator host, cached by content hash.

A kernel is one C++ translation unit (shim include + rewritten user source + entry wrapper)
built into a shared library that the host (`kport-simhost`, built once) loads in a child process.
Kernel source comes from elsewhere, so the compiler runs in the jail (runners/sandbox.py): it
sees kport's headers, the compiler and a scratch folder, nothing else. The cache key covers the
TU text, every shim/runtime file, the flags, the compiler and the vetting rules, so editing any
of them rebuilds; entries live under ``$KPORT_HOME/cache/build``, outside every jail, each
stored with its hash and verified when used.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from runners import opcount, workitems
from runners.lifetime import partial_file, temp_folder
from runners.sandbox import Jail, Limits, Mount, die_with_parent, read_jailed, tied_command
from runners.settings import Settings, load_settings
from runners.toolchain import Compiler, CompilerNotFound, find_compiler

SIMCORE = Path(__file__).resolve().parent / "simcore"
INCLUDE = SIMCORE / "include"
CUDA_SYSINCLUDE = INCLUDE / "kport" / "cuda" / "sysinclude"
RUNTIME_SOURCES = ("host.cpp", "scheduler.cpp", "checks.cpp", "tsan_atomics.cpp", "fiber.cpp",
                   "lockdown.cpp", "counters.cpp", "operator_new.cpp")

KERNEL_FLAGS = (
    "-std=c++20", "-O2", "-fPIC", "-fno-exceptions", "-fno-rtti",
    # Round half/bfloat after every operation, as GPUs do (clang keeps excess precision else).
    "-Xclang", "-ffloat16-excess-precision=none", "-Xclang", "-fbfloat16-excess-precision=none",
    "-Wno-unknown-attributes", "-Wno-ignored-attributes", "-Wno-pass-failed", "-ferror-limit=20",
)
# Checked builds call our __tsan_* hooks on every access. -Xclang keeps the driver from linking
# TSan's own runtime; line tables let findings name source lines.
# No vectorizing in checked builds: a vector access spans several simulated threads, and the
# hooks must see each thread's own access to attribute it. No function entry/exit hooks: the
# checks do not use them. A read that a write to the same address follows is instrumented too:
# by default ThreadSanitizer leaves it to the write, and an uninitialised `s[t] += v` went
# unreported (costs the benchmark's scan 40%; docs/simulators.md).
CHECKED_FLAGS = ("-Xclang", "-fsanitize=thread", "-gline-tables-only", "-fno-vectorize",
                 "-fno-slp-vectorize", "-mllvm", "-tsan-instrument-func-entry-exit=0",
                 "-mllvm", "-tsan-instrument-read-before-write=1")
# No unrolling in checked builds either, not even where the source asks for it (#pragma
# unroll): the checks go in after the optimiser, at every copy of every access, and llama.cpp's
# gated linear attention (two loops over a head of 128 unrolled) took 5.8 s in the second
# compile step with 543 checked accesses, 0.4 s with 33. Unrolling changes no result (no
# reassociation without fast-math) and no access a check sees. Counting builds unroll as the
# source asks, as Apple's compiler would: their operation counts feed the cost model.
NO_UNROLL_FLAGS = ("-fno-unroll-loops", "-mllvm", "-pragma-unroll-threshold=0")
# The instrumentation runs last in clang's pipeline, so its hook calls stay calls. Checked
# builds therefore stop at LLVM IR and optimise it again: the hooks kport/checks.h defines
# (an inline bounds check, the rest in the runtime) are inlined at every access.
CHECKED_CODEGEN_FLAGS = ("-O2", "-fPIC", "-fno-vectorize", "-fno-slp-vectorize", *NO_UNROLL_FLAGS)
# The host uses no C++ library (rt/mini.h has what it needs): zig would otherwise build its
# libc++ from source on the host's first link, a minute of CPU for each new kport version.
HOST_FLAGS = ("-std=c++20", "-O2", "-pthread", "-rdynamic", "-nostdlib++", "-nostdinc++",
              "-fno-exceptions", "-fno-rtti")
# kport-tie (rt/tie.cpp) uses no library at all: one static binary for every jail, /usr or not.
TIE_FLAGS = ("-std=c++20", "-O2", "-static", "-nostdlib", "-ffreestanding", "-fno-builtin",
             "-fno-stack-protector", "-fno-exceptions", "-fno-rtti")
TIE_MACHINES = ("x86_64", "amd64", "aarch64", "arm64")
# Kernels link against nothing: the host provides libc, libm and operator new. So a jailed
# compile needs no writable compiler cache (zig would otherwise build its libc++ there).
LINK_FLAGS = ("-shared", "-nostdlib")
COMPILE_MEMORY = 8 << 30  # address space of one jailed compile
COMPILE_FILE_BYTES = 256 << 20  # largest file a compile may write
MAX_PREPROCESSED = 64 << 20

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
    timed_out: bool = False  # a compile step ran out of KPORT_COMPILE_TIMEOUT (not cached)


def kernel_tail(dialect: str, needs_sync: bool, preamble: str, body: str,
                regions: bool = False) -> str:
    """The end of every kernel TU: ``preamble`` (entry helpers), ``__kp_entry_body`` running one
    thread with ``body`` (C++ statements over ``void** __kp_a``) and the exported ABI;
    ``regions``: the kernel was rewritten into work-item loops (runners/workitems.py) and
    ``body`` runs a whole group."""
    return (f'#line 1 "kport-entry"\n#define __KP_NEEDS_SYNC {int(needs_sync)}\n'
            f'#define __KP_REGIONS {int(regions)}\n'
            f'#define __KP_DIALECT "{dialect}"\n{preamble}'
            "static inline __attribute__((always_inline)) void __kp_entry_body(void** __kp_a) {\n"
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


def failure_diagnostics(log: str) -> list[Diagnostic]:
    """The errors of a failed build; when the compiler said nothing in its usual form (a
    timeout, a crash, output cut short) its last line, so a failure is never silent."""
    found = parse_diagnostics(log)
    if any(d.severity == "error" for d in found):
        return found
    crash = re.search(r"^fatal error: (error in backend: .*)$", log, re.M)
    if crash:  # clang itself failed on valid input: say so, not its last line of noise
        return found + [Diagnostic("kernel", 0, 0, "error", "metal_sim's compiler (clang) "
                                   f"crashed: {crash[1][:300]}; this is a metal_sim "
                                   "limitation, not necessarily an error in the kernel")]
    last = next((ln.strip() for ln in reversed(log.splitlines()) if ln.strip()),
                "the compiler failed without a message")
    return found + [Diagnostic("kernel", 0, 0, "error", last[:500])]


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
def _shim_times() -> str:
    """Every shim file's modification time: a precompiled prelude remembers them, and clang
    refuses it (or re-reads a header it holds) once one differs, even with the same text."""
    return "\n".join(f"{p.relative_to(SIMCORE)} {p.stat().st_mtime_ns}"
                     for p in sorted(SIMCORE.rglob("*.h")) if p.is_file())


# A TU's prelude: its first lines while they include kport's shims or set kport's switches
# (runners/cuda_sim and metal_sim start every TU so). Compiled once per flag set into a
# precompiled header (most of a CUDA TU's front-end time: 0.30 s -> 0.10 s a compile).
_PRELUDE_LINE = re.compile(r"#include <kport/[\w/.]+>|#define __KP_\w+ 1")


def split_prelude(tu: str) -> tuple[str, str]:
    """(the prelude's lines, the TU with them blanked: line numbers stay)."""
    lines = tu.split("\n")
    n = next((i for i, ln in enumerate(lines) if not _PRELUDE_LINE.fullmatch(ln)), len(lines))
    if not any(ln.startswith("#include") for ln in lines[:n]):
        return "", tu
    return "\n".join(lines[:n]) + "\n", "\n" * n + "\n".join(lines[n:])


@functools.lru_cache(maxsize=1)
def cpu_id() -> str:
    """The host CPU's model and features: builds target the native CPU (zig's default), so a
    home shared between machines must not reuse them across CPUs."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        lines = [ln for ln in info.splitlines() if ln.startswith(("model name", "flags"))][:2]
    except OSError:
        lines = []
    return platform.machine() + "|" + "|".join(lines)


def target_flags(compiler: Compiler) -> tuple[str, ...]:
    """Flags that make a kernel round the same on every host: narrowing to bfloat goes
    through kport/float_calls.h, not an x86 CPU's own bf16 conversion (AVX512-BF16,
    AVX-NE-CONVERT), which treats subnormal inputs as zero. zig targets the native CPU and
    takes features off its -mcpu (a -mno-* flag would make it drop to a baseline CPU, and
    with it F16C); a plain clang targets generic x86-64, which has neither, unless its
    command says otherwise."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ()
    if compiler.zig:
        return ("-mcpu=native-avx512bf16-avxneconvert",)
    return ("-mno-avx512bf16", *(("-mno-avxneconvert",) if compiler.major >= 16 else ()))


def _key(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _partials(settings: Settings) -> Path:
    """Where cache entries are written before they are renamed into place: one folder, swept
    of what killed processes left whenever a new one is made (runners/lifetime.py)."""
    return settings.build_cache_dir / "partial"


def _compile(compiler: Compiler, args: list[str], out: Path, timeout: float,
             settings: Settings) -> tuple[bool, str, bool]:
    """Build kport's own simulator host (trusted code, not jailed), writing to a partial file
    and renaming: concurrent builds never see halves. The compiler (zig's starts more
    processes) runs tied to kport: a timeout, Ctrl-C or kport's death ends all of it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_file(_partials(settings), out.suffix)
    on_parent_death = die_with_parent()

    def tie() -> None:
        os.setsid()
        on_parent_death()

    try:
        proc = subprocess.Popen(tied_command([*compiler.command, *args, "-o", tmp]),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, preexec_fn=tie)
        try:
            log = proc.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            return False, f"compiler timed out after {timeout:.0f} s", True
        finally:
            if proc.poll() is None:  # a timeout or an interruption: the whole group goes
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        ok = proc.returncode == 0
        if ok:
            os.replace(tmp, out)
        return ok, log, False
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def host_executable(settings: Settings | None = None) -> Path:
    """The simulator host, built once per compiler and runtime version; verified against its
    recorded hash on every use."""
    settings = settings or load_settings()
    compiler = find_compiler(settings.cxx)
    exe = _host_folder(compiler, settings) / "kport-simhost"
    if cached_file(exe) is None:
        sources = [str(SIMCORE / "rt" / name) for name in RUNTIME_SOURCES]
        # Seconds, also the first: no libc++ (HOST_FLAGS) and, with zig, no compiler-rt built
        # from source either (-rtlib=none; the host calls none of its functions).
        rtlib = ("-rtlib=none",) if compiler.zig else ()
        ok, log, _ = _compile(compiler, [*HOST_FLAGS, *rtlib, *sources, "-ldl"], exe, 900,
                              settings)
        if not ok:
            raise RuntimeError(f"building the simulator host failed (a kport bug):\n"
                               f"{log[-4000:]}")
        _record_hash(exe, exe.read_bytes())
    tie_executable(settings)  # beside it: a copy of the host's folder carries both
    return exe


def _host_folder(compiler: Compiler, settings: Settings) -> Path:
    key = _key(shim_digest(), compiler.describe(), cpu_id(), *HOST_FLAGS)
    return settings.build_cache_dir / f"host-{key}"


def tie_executable(settings: Settings | None = None) -> Path | None:
    """kport-tie, the first process of every jail (rt/tie.cpp says why), built once beside the
    host; None where it cannot be: no compiler, or a machine other than x86_64 and aarch64 (a
    jail there is tied to kport by bubblewrap alone)."""
    settings = settings or load_settings()
    if platform.machine().lower() not in TIE_MACHINES:
        return None
    try:
        compiler = find_compiler(settings.cxx)
    except CompilerNotFound:
        return None
    exe = _host_folder(compiler, settings) / "kport-tie"
    if cached_file(exe) is not None:
        return exe
    ok, log, _ = _compile(compiler, [*TIE_FLAGS, str(SIMCORE / "rt" / "tie.cpp")], exe, 300,
                          settings)
    if not ok:
        raise RuntimeError(f"building kport-tie failed (a kport bug):\n{log[-4000:]}")
    _record_hash(exe, exe.read_bytes())
    return exe


@dataclass(frozen=True)
class Vetting:
    """Checks a build runs when it is not cached: on ``tu`` preprocessed (``clang -E``, in the
    jail; the source as its author wrote it, which may differ from the TU compiled) before
    compiling, and on the linked library's bytes after. Their findings fail the build as compile
    errors do, and are cached with it (``digest`` and ``tu`` are part of the key)."""

    digest: str
    tu: str
    preprocessed: Callable[[str], list[Diagnostic]]
    library: Callable[[bytes], list[Diagnostic]]


def _hash_file(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _record_hash(path: Path, data: bytes) -> None:
    _hash_file(path).write_text(hashlib.sha256(data).hexdigest())


# Files this process has verified, by path: the stat of the file and of its hash file when
# they matched. A file whose stat is unchanged since is not read and hashed again (the
# simulator host is asked for at every launch); replacing or writing either file changes its
# change time, which no user-space call can set back, so that is still caught.
_VERIFIED: dict[Path, tuple] = {}


def _stamp(path: Path) -> tuple:
    st, sh = os.stat(path), os.stat(_hash_file(path))
    return tuple((s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in (st, sh))


def cached_file(path: Path) -> Path | None:
    """``path`` when it is in the cache and matches the hash recorded when it was stored; a
    file that does not match (damaged, or replaced behind kport's back) is removed."""
    try:
        stamp = _stamp(path)
        if _VERIFIED.get(path) == stamp:
            return path
        want = _hash_file(path).read_text().strip()
        data = path.read_bytes()
    except OSError:
        _VERIFIED.pop(path, None)
        return None
    if hashlib.sha256(data).hexdigest() == want:
        with contextlib.suppress(OSError):
            if _stamp(path) == stamp:  # not changed while it was read
                if len(_VERIFIED) >= 4096:
                    _VERIFIED.clear()
                _VERIFIED[path] = stamp
        return path
    _VERIFIED.pop(path, None)
    path.unlink(missing_ok=True)
    return None


def _store(folder: Path, name: str, data: bytes, settings: Settings,
           hashed: bool = True) -> Path:
    """Write ``data`` into the cache atomically (a partial file renamed into place), with its
    hash unless ``hashed`` is False."""
    tmp = partial_file(_partials(settings))
    try:
        Path(tmp).write_bytes(data)
        path = folder / name
        if hashed:
            _record_hash(path, data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def compile_jail(compiler: Compiler, scratch: Path, pch: Path | None = None,
                 hooks: Path | None = None) -> Jail:
    """The jail of a compile writing to ``scratch``; ``pch`` (a precompiled prelude) and
    ``hooks`` (the access hooks' bitcode): their folders are there too, read-only."""
    mounts = [Mount(INCLUDE), Mount(scratch, writable=True), *map(Mount, compiler.mounts),
              *(Mount(p.parent) for p in (pch, hooks) if p is not None)]
    return Jail(mounts, system=compiler.system, proc=True,
                env={**compiler.env(scratch), "HOME": str(scratch), "TMPDIR": str(scratch)})


def build_modes(tu: str, regions: str | None, needs_sync: bool, *, checked: bool,
                dialect: str = "metal", settings: Settings | None = None,
                vetting: Vetting | None = None, count: bool = False) -> tuple[Build, str]:
    """(the build, how it runs a group: workitems.MODE_*): ``regions``, the kernel in
    work-item loops (one loop for a kernel without barriers), when it is given and compiles;
    else ``tu`` (fibers when ``needs_sync``, else the plain thread loop), whose diagnostics are
    the user's."""
    settings = settings or load_settings()
    if regions is not None and settings.sim_work_items == "auto":
        build = build_kernel(regions, checked=checked, dialect=dialect, settings=settings,
                             vetting=vetting, count=count)
        if build.ok:
            return build, workitems.MODE_REGIONS
        if build.timed_out:  # the kernel's own code is slow to compile: the plain TU would be
            return build, workitems.MODE_REGIONS  # too, and the user waited once already
    build = build_kernel(tu, checked=checked, dialect=dialect, settings=settings,
                         vetting=vetting, count=count)
    return build, workitems.MODE_FIBERS if needs_sync else workitems.MODE_LOOP


def build_kernel(tu: str, *, checked: bool, dialect: str = "metal",
                 settings: Settings | None = None, vetting: Vetting | None = None,
                 count: bool = False) -> Build:
    """Compile a kernel TU into a shared library in the jail, or return the diagnostics of
    the failure (``vetting``'s findings among them). ``count`` (with ``checked``): a counting
    build, each basic block counted (runners/opcount.py; its table beside kernel.so). Raises
    SandboxUnavailable when there is no jail and the user has not opted out."""
    settings = settings or load_settings()
    compiler = find_compiler(settings.cxx)
    flags = [*KERNEL_FLAGS, *target_flags(compiler), *(CHECKED_FLAGS if checked else ()),
             *(opcount.COVERAGE_FLAGS if count and checked else
               NO_UNROLL_FLAGS if checked else ()), f"-I{INCLUDE}"]
    if checked and "__kp_tg_alloc(" in tu:  # kport/checks.h: threadgroup memory checked first
        flags.append("-D__KP_TG_FIRST=1")
    hooks = checks_bitcode(compiler, flags, tu, settings) if checked else None
    if hooks is not None:
        flags.append(HOOKS_APART)
    if dialect == "cuda":
        # PTX cvt saturates out-of-range float->int casts and maps NaN to 0; so does this.
        flags += [f"-I{CUDA_SYSINCLUDE}", "-fno-strict-float-cast-overflow"]
    key = _key(tu, shim_digest(), compiler.describe(), cpu_id(), *flags, *LINK_FLAGS,
               *((vetting.digest, vetting.tu) if vetting else ()))
    folder = settings.build_cache_dir / key[:2] / key
    library, failed = folder / "kernel.so", folder / "failed.log"
    start = time.perf_counter()
    if cached_file(library) is not None:
        return Build(True, library, seconds=time.perf_counter() - start, cached=True)
    if failed.is_file():
        log = failed.read_text(errors="replace")
        return Build(False, None, failure_diagnostics(log), log, time.perf_counter() - start,
                     True)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cpp").write_text(tu)  # for people reading the cache; never compiled
    with temp_folder("kport-build-") as tmp:
        scratch = Path(tmp)
        if vetting:
            (scratch / "vetted.cpp").write_text(vetting.tu)

        def build(text: str, pch: Path | None) -> tuple[bytes | None, str, bool]:
            (scratch / "kernel.cpp").write_text(text)
            return _jailed_build(compiler, flags, scratch, settings, vetting, pch=pch,
                                 hooks=hooks)

        data, log, timed_out = with_precompiled_prelude(
            compiler, flags, tu, settings, build,
            refused=lambda r: r[0] is None and not r[2] and PCH_REFUSED.search(r[1]) is not None)
        table = scratch / opcount.TABLE_FILE
        if data is not None and table.is_file():
            _store(folder, opcount.TABLE_FILE, table.read_bytes(), settings)
    seconds = time.perf_counter() - start
    if data is None:
        if not timed_out:  # a timeout says nothing about the source: try again next time
            _store(folder, failed.name, log.encode(), settings, hashed=False)
        return Build(False, None, failure_diagnostics(log), log, seconds, timed_out=timed_out)
    return Build(True, _store(folder, "kernel.so", data, settings), parse_diagnostics(log), log,
                 seconds)


PCH_FILE = "prelude.pch"
# A header whose time changed but whose text did not (two processes writing prelude.h) still
# fits: clang compares the text then.
PCH_FLAGS = ("-fpch-validate-input-files-content",)
# clang's words when a precompiled header does not fit the compile (then it compiles without)
PCH_REFUSED = re.compile(r"precompiled (header|file)|PCH file")
T = TypeVar("T")  # what a compile given to with_precompiled_prelude returns


def with_precompiled_prelude(compiler: Compiler, flags: list[str], tu: str, settings: Settings,
                             compile: Callable[[str, Path | None], T],
                             refused: Callable[[T], bool],
                             command: list[str] | None = None) -> T:
    """``compile(text, pch)``: of ``tu`` with its prelude blanked (split_prelude) and read from
    the cached precompiled header ``pch``; of ``tu`` as written when it has no prelude, the
    header cannot be built, or clang refuses it (``refused`` says so of a result: the header is
    removed then, and the next compile makes it again). ``command``: as precompiled_prelude's."""
    prelude, body = split_prelude(tu)
    pch = precompiled_prelude(compiler, flags, prelude, settings, command) if prelude else None
    if pch is not None:
        out = compile(body, pch)
        if not refused(out):
            return out
        pch.unlink(missing_ok=True)
    return compile(tu, None)


def precompiled_prelude(compiler: Compiler, flags: list[str], prelude: str, settings: Settings,
                        command: list[str] | None = None) -> Path | None:
    """The cached precompiled header of ``prelude`` under ``flags`` (built in the jail on first
    use, by every process that finds none), or None when it cannot be built: the build then
    reads the headers itself. ``command``: the compiler command that reads it, when not
    ``compiler``'s own (the address-space check runs zig's clang)."""
    command = list(command or compiler.command)
    key = _key("pch", prelude, shim_digest(), _shim_times(), compiler.describe(), cpu_id(),
               *command, *flags)
    folder = settings.build_cache_dir / "pch" / key
    header = folder / "prelude.h"

    def keep_header() -> None:  # beside its precompiled form: clang checks it is there, unchanged
        if not header.is_file() or header.read_text() != prelude:
            _store(folder, header.name, prelude.encode(), settings, hashed=False)
    return _cached_output(compiler, folder / PCH_FILE, settings, [
        *command, *flags, *PCH_FLAGS, "-x", "c++-header", str(header), "-o", PCH_FILE],
        before=keep_header, shared=folder / PCH_FILE)


def _cached_output(compiler: Compiler, path: Path, settings: Settings, command: list[str], *,
                   inputs: dict[str, str] | None = None, before: Callable[[], None] | None = None,
                   shared: Path | None = None) -> Path | None:
    """``path`` (a cache folder's file) when it is cached, else made by ``command``: run in the
    jail in a scratch folder that holds ``inputs`` (name: text), it writes ``path``'s name
    there; ``before`` runs first, once the folder exists; ``shared``'s folder is mounted
    read-only. None when the command failed (its log is kept: it is not run again) or timed
    out."""
    folder = path.parent
    if cached_file(path) is not None:
        return path
    if (folder / "failed.log").is_file():
        return None
    folder.mkdir(parents=True, exist_ok=True)
    if before is not None:
        before()
    with temp_folder("kport-cached-") as tmp:
        scratch = Path(tmp)
        for name, text in (inputs or {}).items():
            (scratch / name).write_text(text)
        timeout = settings.compile_timeout
        ran = compile_jail(compiler, scratch, shared).run(
            command, cwd=scratch, timeout=timeout, settings=settings,
            limits=Limits(memory=COMPILE_MEMORY, file_size=COMPILE_FILE_BYTES,
                          cpu_seconds=int(timeout * 2) + 5))
        data = read_jailed(scratch / path.name, COMPILE_FILE_BYTES) \
            if ran.returncode == 0 and not ran.timed_out else None
    if data is None:
        if not ran.timed_out:
            _store(folder, "failed.log", ran.output.encode(), settings, hashed=False)
        return None
    return _store(folder, path.name, data, settings)


# A checked build's access hooks (kport/checks.h) compiled apart, once per variant, and linked
# into each kernel's IR before its code is generated (clang's -mlink-builtin-bitcode: only the
# hooks the kernel calls, made internal, so that once inlined at every access no copy is left).
# Compiled in every kernel TU instead, all twenty hooks and their out-of-line halves were most
# of a small kernel's compile: 0.37 s -> 0.15 s a checked build of a one-line kernel.
HOOKS_APART = "-D__KP_HOOKS_APART=1"
HOOKS_FILE = "hooks.bc"
HOOKS_MIN_CLANG = 17  # links bitcode into a compile of IR (older clang would ignore it)
_NEEDS_SYNC = re.compile(r"^#define __KP_NEEDS_SYNC ([01])$", re.M)


def checks_bitcode(compiler: Compiler, flags: list[str], tu: str,
                   settings: Settings) -> Path | None:
    """The cached bitcode of the access hooks for the checked kernel ``tu`` compiled with
    ``flags`` (built in the jail on first use), or None (older clang, a TU without kport's
    entry, or a failure): the hooks are then compiled in the TU, as kernel_abi.h includes
    them."""
    sync = _NEEDS_SYNC.search(tu)
    if compiler.major < HOOKS_MIN_CLANG or sync is None:
        return None
    hook_flags = [*KERNEL_FLAGS, *target_flags(compiler), "-gline-tables-only", "-fno-vectorize",
                  "-fno-slp-vectorize", *NO_UNROLL_FLAGS, f"-I{INCLUDE}",
                  *(f for f in flags if f.startswith("-D__KP_")), HOOKS_APART]
    source = (f"#include <kport/rt.h>\n#define __KP_NEEDS_SYNC {sync[1]}\n"
              "#include <kport/checks.h>\n")
    key = _key("hooks", source, shim_digest(), compiler.describe(), cpu_id(), *hook_flags)
    return _cached_output(
        compiler, settings.build_cache_dir / "hooks" / key / HOOKS_FILE, settings,
        [*compiler.command, *hook_flags, "-emit-llvm", "-c", "hooks.cpp", "-o", HOOKS_FILE],
        inputs={"hooks.cpp": source})


def _jailed_build(compiler: Compiler, flags: list[str], scratch: Path, settings: Settings,
                  vetting: Vetting | None, pch: Path | None = None, hooks: Path | None = None
                  ) -> tuple[bytes | None, str, bool]:
    """(library bytes or None, the log, timed out): preprocess and vet, compile, link and vet,
    each a jailed command in ``scratch``; ``pch``: kernel.cpp's prelude precompiled
    (split_prelude; its folder is mounted read-only); ``hooks``: a checked build's access
    hooks, compiled apart (checks_bitcode), linked in before the code is generated."""
    jail, timeout = compile_jail(compiler, scratch, pch, hooks), settings.compile_timeout
    link = ["-Xclang", "-mlink-builtin-bitcode", "-Xclang", str(hooks)] if hooks else []
    limits = Limits(memory=COMPILE_MEMORY, file_size=COMPILE_FILE_BYTES,
                    cpu_seconds=int(timeout * 2) + 5)
    steps = [[*flags, "-E", "vetted.cpp", "-o", "vetted.ii"]] if vetting else []
    if pch is not None:
        flags = [*flags, *PCH_FLAGS, "-include-pch", str(pch)]
    # Code from IR is generated and linked in one compiler run (a jailed compiler run costs
    # ~30-50 ms before it reads a byte); a C++ source is not: with -nostdlib zig also drops
    # its C++ headers.
    if opcount.COVERAGE_FLAGS[0] in flags:  # counting: IR, its blocks numbered, then code
        steps += [[*flags, "-S", "-emit-llvm", "kernel.cpp", "-o", "kernel.ll"],
                  ["-O2", "-fPIC", "-Wno-override-module", *link, *LINK_FLAGS, "counted.ll",
                   "-o", "kernel.so"]]
    elif CHECKED_FLAGS[1] in flags:  # checked: IR with the hook calls, then code inlining them
        steps += [[*flags, "-emit-llvm", "-c", "kernel.cpp", "-o", "kernel.bc"],
                  [*CHECKED_CODEGEN_FLAGS, *link, *LINK_FLAGS, "kernel.bc", "-o", "kernel.so"]]
    else:
        steps += [[*flags, "-c", "kernel.cpp", "-o", "kernel.o"],
                  [*LINK_FLAGS, "kernel.o", "-o", "kernel.so"]]
    log = ""
    for args in steps:
        ran = jail.run([*compiler.command, *args], cwd=scratch, timeout=timeout, limits=limits,
                       settings=settings)
        log += ran.output + ("\n[output cut]\n" if ran.cut else "")
        if ran.timed_out:
            return None, (log + f"\ncompile timed out after {timeout:g} s "
                          "(KPORT_COMPILE_TIMEOUT)"), True
        if ran.returncode != 0:
            return None, log, False
        if args[-1] == "kernel.ll":  # number the blocks (runners/opcount.py)
            ir = read_jailed(scratch / "kernel.ll", COMPILE_FILE_BYTES)
            counted, table = opcount.block_table((ir or b"").decode(errors="replace"))
            (scratch / "counted.ll").write_text(counted)
            (scratch / opcount.TABLE_FILE).write_text(json.dumps(table))
        if args[-1] == "vetted.ii":
            text = read_jailed(scratch / "vetted.ii", MAX_PREPROCESSED)
            found = vetting.preprocessed(text.decode(errors="replace")) if text is not None \
                else [Diagnostic("kernel", 0, 0, "error", "the preprocessed source is over "
                                 f"{MAX_PREPROCESSED >> 20} MB")]
            if found:
                return None, log + "".join(f"{d}\n" for d in found), False
    data = read_jailed(scratch / "kernel.so", COMPILE_FILE_BYTES)
    if data is None:
        return None, log + "\nthe compiler wrote no usable kernel.so", False
    if vetting:
        found = vetting.library(data)
        if found:
            return None, log + "".join(f"{d}\n" for d in found), False
    return data, log, False
