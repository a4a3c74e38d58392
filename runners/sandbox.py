"""The jail: every compile and run of code kport did not write happens in one.

On Linux the jail is bubblewrap (Debian's `bwrap`): new user, mount, PID, IPC, UTS and network
namespaces (no network at all: the jail's own loopback reaches nothing outside), no
capabilities, a clean environment, a read-only view of only the paths a command needs (bound at
their own paths, so file names in messages stay the same) and one private writable folder,
thrown away afterwards. The simulator host adds Landlock and seccomp inside it before any
candidate code runs (runners/simcore/rt/lockdown.cpp). docs/harness.md states the threat model.

Where the OS cannot provide the jail (macOS, a container without user namespaces, no bwrap),
commands that would run outside code refuse, unless the user opts in with
``KPORT_UNSANDBOXED=1`` (or ``--unsandboxed``); every record then says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from runners.errors import KportError
from runners.settings import Settings, load_settings

# How to get bubblewrap, for messages.
INSTALL_HINT = ("install bubblewrap: `sudo apt-get install bubblewrap` (Debian, Ubuntu), "
                "`sudo dnf install bubblewrap` (Fedora), `sudo pacman -S bubblewrap` (Arch)")
NAMESPACES = ("user", "mount", "pid", "ipc", "uts", "net", "cgroup")
# The most a jailed command may print; the rest is cut (a diagnostics bomb stays small).
MAX_OUTPUT = 256 << 10
# Top-level system folders that are symlinks into /usr on merged-/usr systems (or real folders).
_SYSTEM_ROOTS = ("/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")


class SandboxUnavailable(KportError):
    """Outside code would have to run without the jail; the message says why and what to do."""


@dataclass(frozen=True)
class Isolation:
    """What isolation code from elsewhere gets on this machine (``kport doctor --json``)."""

    jail: str  # e.g. "bubblewrap 0.8.0", "" when there is none
    landlock: int  # Landlock ABI of the kernel, 0 when absent
    seccomp: bool  # the kernel can filter system calls
    problem: str  # why there is no jail, "" when there is one
    unsandboxed: bool  # the user opted out of the requirement

    @property
    def jailed(self) -> bool:
        return bool(self.jail)

    def summary(self) -> str:
        """One line for reports, e.g. ``bubblewrap 0.8.0 jail + landlock 7 + seccomp``."""
        parts = [f"{self.jail} jail ({', '.join(NAMESPACES)} namespaces)"] if self.jail else [
            "NO JAIL (unsandboxed: " + self.problem + ")" if self.unsandboxed else
            "no jail: " + self.problem]
        if self.landlock:
            parts.append(f"landlock {self.landlock}")
        if self.seccomp:
            parts.append("seccomp")
        return " + ".join(parts)

    def as_json(self) -> dict:
        return {"jailed": self.jailed, "jail": self.jail, "namespaces": list(NAMESPACES) if
                self.jail else [], "landlock_abi": self.landlock, "seccomp": self.seccomp,
                "unsandboxed": self.unsandboxed, "problem": self.problem,
                "summary": self.summary()}


@dataclass(frozen=True)
class Mount:
    """A host path the jailed command sees at the same path; read-only unless ``writable``."""

    path: Path
    writable: bool = False


@dataclass
class Ran:
    """A finished jailed command: its exit code (negative: killed by that signal) and its
    output (stdout and stderr together, cut at MAX_OUTPUT bytes)."""

    returncode: int
    output: str
    timed_out: bool = False
    seconds: float = 0.0
    cut: bool = False  # the output was longer than MAX_OUTPUT


@dataclass(frozen=True)
class Limits:
    """Resource limits of a jailed command (bytes; seconds of CPU)."""

    memory: int = 8 << 30
    file_size: int = 256 << 20
    cpu_seconds: int = 600


@functools.lru_cache(maxsize=1)
def _landlock_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # create_ruleset
    return max(int(abi), 0)


@functools.lru_cache(maxsize=1)
def _seccomp_available() -> bool:
    return sys.platform.startswith("linux") and Path(
        "/proc/sys/kernel/seccomp/actions_avail").is_file()


def _bwrap() -> str | None:
    return shutil.which("bwrap")


def _base_args(bwrap: str) -> list[str]:
    return [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--uid", "65534",
            "--gid", "65534", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
            "--clearenv", "--hostname", "kport-jail"]


def _system_args() -> list[str]:
    """/usr read-only, and the top-level folders that point into it, as on the host."""
    args = ["--ro-bind", "/usr", "/usr"]
    for root in _SYSTEM_ROOTS:
        path = Path(root)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), root]
        elif path.is_dir():
            args += ["--ro-bind", root, root]
    return args


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[str, str]:
    """(jail description, problem): run `true` in a jail like the real ones, once a process."""
    if not sys.platform.startswith("linux"):
        return "", (f"{sys.platform} has no user namespaces; the jail needs Linux (bubblewrap)")
    bwrap = _bwrap()
    if not bwrap:
        return "", f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}"
    true = shutil.which("true", path="/usr/bin:/bin") or "/usr/bin/true"
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.strip() or "bubblewrap"
        proc = subprocess.run([*_base_args(bwrap), *_system_args(), "--", true],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        return "", f"bubblewrap does not start: {err}"
    if proc.returncode != 0:
        why = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return "", (f"bubblewrap cannot create the jail's namespaces here ({why[0]}); user "
                    "namespaces may be disabled (a container, or a kernel setting such as "
                    "kernel.unprivileged_userns_clone=0)")
    return version, ""


def isolation(settings: Settings | None = None) -> Isolation:
    """What isolation this machine gives outside code, and whether the user opted out."""
    settings = settings or load_settings()
    jail, problem = _probe()
    return Isolation(jail, _landlock_abi(), _seccomp_available(), problem,
                     settings.unsandboxed)


def require_isolation(settings: Settings | None = None) -> Isolation:
    """The isolation in force; raises SandboxUnavailable when there is no jail and the user
    has not opted out."""
    iso = isolation(settings)
    if not iso.jailed and not iso.unsandboxed:
        raise SandboxUnavailable(
            f"kport will not compile or run code from elsewhere without its jail: "
            f"{iso.problem}. To run it anyway, unprotected, set KPORT_UNSANDBOXED=1 or pass "
            "--unsandboxed (every report then says so); `kport doctor` shows the isolation.")
    return iso


def read_jailed(path: Path, limit: int) -> bytes | None:
    """A file the jail wrote: read only if it is a regular file (never through a link), at
    most ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(limit + 1)
    return data if len(data) <= limit else None


def die_with_parent():
    """A function a child calls (before exec) to be SIGKILLed when kport dies (Linux
    PR_SET_PDEATHSIG), so a killed kport leaves nothing running; a no-op elsewhere. Made in
    the parent, before the fork: a parent killed between the fork and the child's prctl has
    already gone, its signal would never come, so the child then ends itself."""
    if not sys.platform.startswith("linux"):
        return lambda: None

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def tie() -> None:
        prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # reparented: kport died before the line above
            os._exit(128 + signal.SIGKILL)
    return tie


def tied_command(command: list[str]) -> list[str]:
    """``command`` wrapped so that it and every process it starts die with kport, even a
    SIGKILLed one: in a PID namespace of its own (bubblewrap, all else as outside: for kport's
    own trusted builds) where bubblewrap works here; else ``command`` as it is (then only the
    process itself is tied, by die_with_parent)."""
    if not _probe()[0]:
        return list(command)
    return [_bwrap(), "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid",
            "--die-with-parent", "--", *command]


def _tie(settings: Settings | None) -> Path | None:
    """The jail's first process, kport-tie (runners/simcore/rt/tie.cpp): it ends every process
    of the jail when kport dies, even in the milliseconds before bubblewrap's own tie to kport
    is made. None where it cannot be built (then bubblewrap's tie alone)."""
    # lazy: simbuild builds kport-tie, and itself runs compiles in this module's jail
    from runners.simbuild import tie_executable

    return tie_executable(settings)


def _preexec(limits: Limits):
    on_parent_death = die_with_parent()

    def apply() -> None:
        os.setsid()  # its own process group: a timeout kills all of it
        on_parent_death()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size, limits.file_size))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    return apply


@dataclass
class Jail:
    """One jailed command's view: ``mounts`` (read-only unless writable), ``system`` for /usr
    and friends, ``proc`` for a /proc of the jail's own processes, ``dev`` for a minimal
    /dev. ``env`` is the whole environment the command gets."""

    mounts: list[Mount] = field(default_factory=list)
    system: bool = True
    proc: bool = False
    dev: bool = False
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, command: list[str], cwd: Path | None, bwrap: str,
             info_fd: int = -1) -> list[str]:
        args = _base_args(bwrap) + (_system_args() if self.system else [])
        if info_fd >= 0:
            args += ["--info-fd", str(info_fd)]
        if self.proc:
            args += ["--proc", "/proc"]
        if self.dev:
            args += ["--dev", "/dev"]
        for m in self.mounts:
            args += ["--bind" if m.writable else "--ro-bind", str(m.path), str(m.path)]
        env = {"PATH": "/usr/bin:/bin", "LANG": "C", **self.env}
        for key, value in env.items():
            args += ["--setenv", key, value]
        return args + ["--chdir", str(cwd or "/"), "--", *command]

    def run(self, command: list[str], *, cwd: Path | None = None, timeout: float,
            limits: Limits = Limits(), settings: Settings | None = None) -> Ran:
        """Run ``command`` in the jail (or, where the user opted out of the jail, directly
        with the same environment and limits), in ``cwd`` (a mounted folder; default /);
        raises SandboxUnavailable when neither may be done. The output is read from a file,
        never more than MAX_OUTPUT bytes of it."""
        iso = require_isolation(settings)
        # bwrap reports the jail's first process on --info-fd: on a timeout that process is
        # killed too, and with it every process of the jail's PID namespace
        info_r, info_w = os.pipe() if iso.jailed else (-1, -1)
        # kport's death reaches the jail through a pipe whose only write end kport holds
        tie = _tie(settings) if iso.jailed else None
        life_r, life_w = os.pipe() if tie else (-1, -1)
        jail = replace(self, mounts=[*self.mounts, Mount(tie)]) if tie else self
        tied = [str(tie), str(life_r), *command] if tie else command
        argv = jail.argv(tied, cwd, _bwrap(), info_w) if iso.jailed else command
        env = None if iso.jailed else {"PATH": "/usr/bin:/bin", "LANG": "C", **self.env}
        start = time.perf_counter()
        try:
            with tempfile.TemporaryFile() as out:  # outside the jail's view
                proc = subprocess.Popen(argv, cwd=cwd or "/", env=env, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=subprocess.STDOUT,
                                        pass_fds=tuple(fd for fd in (info_w, life_r) if fd >= 0),
                                        preexec_fn=_preexec(limits))
                for fd in (info_w, life_r):
                    if fd >= 0:
                        os.close(fd)
                info_w = life_r = -1
                timed_out = False
                try:
                    _wait_for(proc, timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _kill_jail(proc, info_r)
                except BaseException:  # interrupted (Ctrl-C, a case budget): no jail lives on
                    _kill_jail(proc, info_r)
                    raise
                out.seek(0)
                text = out.read(MAX_OUTPUT + 1)
        finally:
            for fd in (info_r, info_w, life_r, life_w):
                if fd >= 0:
                    os.close(fd)
        return Ran(proc.returncode, text[:MAX_OUTPUT].decode(errors="replace"), timed_out,
                   time.perf_counter() - start, len(text) > MAX_OUTPUT)


def _wait_for(proc: subprocess.Popen, timeout: float) -> int:
    """``proc.wait(timeout)`` that returns as soon as the process ends: Popen's own wait polls
    with sleeps of up to 50 ms, a launch's worth of time. Raises subprocess.TimeoutExpired."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or the process is already reaped
        return proc.wait(timeout=timeout)
    try:
        if not select.select([fd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


def _kill_jail(proc: subprocess.Popen, info_fd: int) -> None:
    """Kill a jailed command and wait until its jail is gone: bwrap, and the jail's first
    process (named on bwrap's info fd), whose death ends every process in the jail."""
    child = None
    if info_fd >= 0:
        os.set_blocking(info_fd, False)
        try:
            child = json.loads(os.read(info_fd, 4096).decode()).get("child-pid")
        except (OSError, ValueError, AttributeError):
            child = None
    if child:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while child and time.monotonic() < deadline:  # a zombie has outlived all of its jail
        try:
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except (OSError, IndexError):
            break
        time.sleep(0.01)
