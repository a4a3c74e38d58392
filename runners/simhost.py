"""Run one simulated launch in a child process in the jail; the parent reads the verdict.

The child is `kport-simhost`, run in the jail (runners/sandbox.py) with CPU-time, address-space,
file-size and core limits and a wall-clock timeout. It sees /usr, itself, the kernel library
and a private folder holding the request and buffer files, and it locks itself down (Landlock,
seccomp) before it loads the kernel. Its result is a JSON file read as plain data; its stdout
is never trusted. A crash ends only the child.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from runners import opcount
from runners.base import LaunchRecord
from runners.lifetime import temp_folder
from runners.sandbox import Jail, Limits, Mount, SandboxUnavailable, read_jailed, require_isolation
from runners.settings import CHECKS, Settings, load_settings
from runners.simbuild import SIMCORE, host_executable

# Largest total of buffers one simulated launch may use: the simulator runs on the host's memory.
MAX_LAUNCH_BYTES = 4 << 30

# Set by build_only(): run_launch builds what a launch needs but launches nothing.
_BUILD_ONLY = contextvars.ContextVar("kport_build_only", default=False)

ERROR_KINDS = {"divergence", "out_of_bounds", "race", "invalid", "unsupported", "limit",
               "uninitialized", "crash", "timeout", "sandbox"}


@dataclass(frozen=True)
class Finding:
    """Something the simulator saw go wrong in the kernel, located where it could be."""

    kind: str  # one of ERROR_KINDS
    message: str
    line: int = 0  # in the user's source, 0 when unknown
    file: str = ""
    thread: tuple[int, int, int] | None = None
    group: tuple[int, int, int] | None = None
    count: int = 1

    def __str__(self) -> str:
        where = f"{self.file or 'line'}:{self.line}: " if self.line else ""
        at = f" (thread {self.thread}, group {self.group})" if self.thread else ""
        more = f" [x{self.count}]" if self.count > 1 else ""
        return f"{where}{self.kind}: {self.message}{at}{more}"


@dataclass
class BufferArg:
    name: str
    data: np.ndarray  # contents before the launch; written-back buffers are re-read after
    mode: str  # in | out | inout
    # held by a struct argument's pointer field (ScalarArg.pointers), not a kernel argument
    detached: bool = False


@dataclass
class ScalarArg:
    name: str
    raw: bytes
    # a struct's pointer fields: (byte offset, name of the detached BufferArg it points at)
    pointers: tuple[tuple[int, str], ...] = ()


@dataclass
class LaunchSpec:
    """Geometry in groups; ``grid_threads`` bounds non-uniform (Metal) edge groups."""

    groups: tuple[int, int, int]
    threadgroup: tuple[int, int, int]
    grid_threads: tuple[int, int, int]
    nonuniform: bool
    tg_mem_limit: int
    dyn_smem: int = 0
    checked: bool = True
    count: bool = False  # performance counters (rt/counters.cpp); only with checked


# Per buffer, in elements: {"read": (lo, hi) | None, "write": (lo, hi) | None}, hi exclusive.
Extents = dict[str, tuple[int, int] | None]


@dataclass
class LaunchResult:
    status: str  # ok | fault | timeout | crash | skipped (build_only: nothing ran)
    findings: list[Finding] = field(default_factory=list)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    printf: str = ""
    wall_s: float = 0.0  # the child's whole run, buffer I/O included
    kernel_s: float = 0.0  # running the threadgroups only
    lockdown: str = "none"  # what the host installed: landlock+seccomp, seccomp, none
    lockdown_s: float = 0.0  # the host's time installing it
    extents: dict[str, Extents] = field(default_factory=dict)  # checked mode only
    counters: dict = field(default_factory=dict)  # count mode only (runners/perf_model.py)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and not self.findings


@dataclass
class SimRecord(LaunchRecord):
    """What a simulated launch of a candidate gives back: a record, never an exception, for
    the kernel's own failures (a compile error, findings); ``kernel_s`` is the child's time
    running the threadgroups, and ``timing`` stays None (simulated time is no measurement)."""

    build: object = None  # simbuild.Build
    # Checked mode: buffer name -> {"read": (lo, hi) | None, "write": (lo, hi) | None}, the
    # elements [lo, hi) any thread read or wrote, redzones included; {} in fast mode.
    extents: dict[str, Extents] = field(default_factory=dict)
    # Count mode: the host's performance counters (rt/counters.cpp; read by runners/perf).
    counters: dict = field(default_factory=dict)
    # How a group ran (runners/workitems.py): "work-item loops" (barrier-free regions as loops
    # over the group's threads), "thread loop" (no barrier) or "fibers"; "" when not built.
    mode: str = ""


def launch_dims(value, what: str) -> tuple[int, int, int]:
    """An int or 1-3 ints as a 3-tuple of positive ints; ValueError naming ``what`` otherwise."""
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(int(d) < 1 for d in dims):
        raise ValueError(f"{what} must be 1 to 3 positive integers, got {value!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


@contextlib.contextmanager
def build_only() -> Iterator[None]:
    """Within it, run_launch builds the simulator host and returns status "skipped" without
    launching, so a kernel object's launch only compiles: a harness builds a candidate under
    the compile budget first, and the run that follows finds every build in the cache."""
    token = _BUILD_ONLY.set(True)
    try:
        yield
    finally:
        _BUILD_ONLY.reset(token)


def _scratch_root() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _addr2line(library: Path, findings: list[dict]) -> dict[int, tuple[str, int]]:
    """Map code offsets in the kernel library to the user's (file, line) with binutils'
    addr2line: of the inlined frames, the innermost one outside kport's own shim headers."""
    offsets = sorted({f["pc_offset"] for f in findings if f.get("pc_offset")})
    tool = shutil.which("addr2line")
    if not offsets or not tool:
        return {}
    # binutils parsing a library built from outside code: in the jail too
    ran = Jail([Mount(library)]).run([tool, "-a", "-i", "-e", str(library),
                                      *[hex(o - 1) for o in offsets]], timeout=30)
    shim = str(SIMCORE)
    frames: dict[int, list[tuple[str, int]]] = {}
    current = None
    for text in ran.output.splitlines():
        if text.startswith("0x"):
            current = int(text, 16) + 1
            frames[current] = []
            continue
        file, _, line = text.rpartition(":")
        number = line.split(" ")[0]
        if current is not None and number.isdigit() and int(number) > 0:
            frames[current].append((file, int(number)))
    located = {}
    for off, stack in frames.items():
        user = [f for f in stack if not f[0].startswith(shim)]
        if user:
            # Names come from #line directives; the compiler's cwd prefix is noise.
            located[off] = (Path(user[0][0]).name, user[0][1])
    return located


def _findings(raw: dict, library: Path, source_file: str) -> list[Finding]:
    items = list(raw.get("findings") or [])
    if raw.get("fatal"):
        items.append(raw["fatal"])
    located = _addr2line(library, items)
    out = []
    for item in items:
        file, line = located.get(item.get("pc_offset", 0), ("", 0))
        if item.get("line"):  # a shim built-in passed its caller's line (__builtin_LINE)
            file, line = file or source_file, item["line"]
        thread, group = item.get("thread"), item.get("group")
        out.append(Finding(item["kind"], item["message"], line, file,
                           tuple(thread) if thread else None, tuple(group) if group else None,
                           item.get("count", 1)))
    return out


def _extents(raw: dict) -> dict[str, Extents]:
    """The host's "extents" (checked mode) as name -> {"read": (lo, hi) | None, "write": ...};
    {} when the host wrote none."""
    def span(value) -> tuple[int, int] | None:
        return (int(value[0]), int(value[1])) if value else None

    return {name: {side: span(sides.get(side)) for side in ("read", "write")}
            for name, sides in (raw.get("extents") or {}).items()}


def _counters(raw: dict, library: Path) -> dict:
    """The host's "counters" (count mode): numbers as ints; "buffers" maps each buffer's name
    to its own counts; the basic blocks executed become ``ops_<class>`` through the build's
    block table (runners/opcount.py), when it has one."""
    out = {}
    for key, value in raw.get("counters", {}).items():
        if key == "blocks":
            table = library.with_name(opcount.TABLE_FILE)
            if table.is_file():
                out.update(opcount.operation_counts(value, json.loads(table.read_text())))
            continue
        out[key] = ({name: {k: int(v) for k, v in counts.items()} for name, counts in
                     value.items()} if isinstance(value, dict) else int(value))
    return out


def _death(returncode: int, jailed: bool) -> Finding:
    """Why the host died without a result: bubblewrap reports a signal as 128 + its number."""
    sig = -returncode if returncode < 0 else (returncode - 128 if jailed and 128 < returncode
                                               < 128 + 65 else None)
    if sig == signal.SIGSYS:
        return Finding("sandbox", "the kernel made a system call the sandbox forbids (it was "
                       "stopped by seccomp: a new process, a file, a socket, ...)")
    try:
        why = f"signal {signal.Signals(sig).name}" if sig else f"exit code {returncode}"
    except ValueError:
        why = f"signal {sig}"
    return Finding("crash", f"the simulated launch died ({why}) before reporting; memory or "
                   "CPU limit?")


def check_mask(settings: Settings) -> int:
    """The host's `checks` bits for a checked launch: 1 bounds, 2 race, 4 uninit. A checked
    launch under 'fast' (performance counters) checks everything."""
    chosen = settings.sim_check_set or frozenset(CHECKS)
    return sum(1 << i for i, name in enumerate(CHECKS) if name in chosen)


def run_launch(library: Path, spec: LaunchSpec, args: list[BufferArg | ScalarArg],
               settings: Settings | None = None, timeout: float | None = None,
               source_file: str = "") -> LaunchResult:
    """Run the kernel library once in a jailed child process; returns outputs and findings.
    Raises SandboxUnavailable when the jail (or, unsandboxed, the host's own lockdown) cannot
    be had and the user has not opted out.

    ``source_file`` names the user's file for findings that carry only a line."""
    settings = settings or load_settings()
    isolation = require_isolation(settings)
    host = host_executable(settings)
    if _BUILD_ONLY.get():
        return LaunchResult("skipped")
    timeout = timeout or settings.sim_timeout
    threads = settings.sim_threads or os.cpu_count() or 1
    buffer_bytes = sum(a.data.nbytes for a in args if isinstance(a, BufferArg))
    with temp_folder("kport-launch-", dir=_scratch_root()) as tmp:
        work = Path(tmp)
        lockdown = "optional" if isolation.unsandboxed and not isolation.jailed else "required"
        lines = [f"kernel {library}", "groups {} {} {}".format(*spec.groups),
                 "tg {} {} {}".format(*spec.threadgroup),
                 "grid {} {} {}".format(*spec.grid_threads),
                 f"nonuniform {int(spec.nonuniform)}", f"tg_mem {spec.tg_mem_limit}",
                 f"dyn_smem {spec.dyn_smem}", f"threads {threads}",
                 f"checked {int(spec.checked)}", f"count {int(spec.count and spec.checked)}",
                 f"checks {check_mask(settings)}",
                 f"result {work / 'result.json'}",
                 f"printf {work / 'printf.txt'}", f"lockdown {lockdown}"]
        for i, arg in enumerate(args):
            if isinstance(arg, BufferArg):
                path = work / f"buf{i}.bin"
                np.ascontiguousarray(arg.data).tofile(path)
                lines.append(f"buffer {arg.name} {arg.data.itemsize} {arg.data.nbytes} "
                             f"{arg.mode} {path}" + (" detached" if arg.detached else ""))
            else:
                lines.append(f"scalar {arg.name} {arg.raw.hex() or '00'}")
                lines += [f"pointer {arg.name} {offset} {target}"
                          for offset, target in arg.pointers]
        (work / "request.txt").write_text("\n".join(lines) + "\n")
        # Address space, not memory: each worker reserves ~1.2 GB of guarded fiber stacks.
        limits = Limits(memory=6 * buffer_bytes + (4 << 30) + threads * (3 << 29),
                        file_size=max(64 << 20, 2 * buffer_bytes),
                        cpu_seconds=int(timeout * 4) + 5)
        jail = Jail([Mount(host), Mount(library), Mount(work, writable=True)])
        ran = jail.run([str(host), str(work / "request.txt")], cwd=work, timeout=timeout,
                       limits=limits, settings=settings)
        if ran.timed_out:
            msg = (f"the launch did not finish in {timeout:g} s (an infinite loop, a spin-wait "
                   "on another threadgroup, or too much work for the simulator)")
            return LaunchResult("timeout", [Finding("timeout", msg)])
        if ran.returncode == 64:
            raise RuntimeError(f"simulator host rejected its request (a kport bug): "
                               f"{ran.output[-2000:]!r}")
        if ran.returncode == 65:
            raise SandboxUnavailable(
                f"the simulator host could not lock itself down: {ran.output.strip()[-500:]}; "
                "set KPORT_UNSANDBOXED=1 to run kernels without it (unsafe)")
        raw_text = read_jailed(work / "result.json", 1 << 24)
        try:
            raw = json.loads(raw_text) if raw_text is not None else None
        except ValueError:
            raw = None
        if not isinstance(raw, dict) or raw.get("status") not in ("ok", "fault"):
            return LaunchResult("crash", [_death(ran.returncode, isolation.jailed)])
        printf = (read_jailed(work / "printf.txt", 1 << 22) or b"").decode(errors="replace")
        result = LaunchResult(raw["status"], _findings(raw, library, source_file), printf=printf,
                              wall_s=float(raw.get("wall_s", 0.0)),
                              kernel_s=float(raw.get("kernel_s", 0.0)),
                              lockdown=str(raw.get("lockdown", "none")),
                              lockdown_s=float(raw.get("lockdown_s", 0.0)),
                              extents=_extents(raw),
                              counters=_counters(raw, library))
        if raw["status"] == "ok":
            for i, arg in enumerate(args):
                if isinstance(arg, BufferArg) and arg.mode != "in":
                    data = read_jailed(work / f"buf{i}.bin", arg.data.nbytes)
                    if data is None or len(data) != arg.data.nbytes:
                        return LaunchResult("crash", [Finding("crash", f"output buffer "
                                                              f"'{arg.name}' came back damaged")])
                    flat = np.frombuffer(data, dtype=arg.data.dtype).copy()
                    result.outputs[arg.name] = flat.reshape(arg.data.shape)
        return result
