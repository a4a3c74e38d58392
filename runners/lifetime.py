"""What a kport process leaves behind when it ends, however it ends.

SIGTERM and SIGHUP become an exception (``Terminated``), so every ``with`` and ``finally`` runs
as it does for Ctrl-C. SIGKILL cannot be caught: children die with kport (PR_SET_PDEATHSIG,
bubblewrap's --die-with-parent, kport-tie in every jail), and every scratch folder and partial
file kport makes carries its owner in its name (``kport-launch-p1234s5678n4026531836-x1y2``:
pid, process start time, PID namespace), so the next kport that makes one removes those whose
owner is gone.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

# Where scratch folders live besides tempfile.gettempdir(): simulated launches use /dev/shm.
SHARED_MEMORY = Path("/dev/shm")
# Where the owner cannot be checked exactly (no /proc), an entry must be this old to go.
UNCHECKED_AGE_S = 60.0
_OWNED = re.compile(r"^(?:kport-[a-z0-9-]+?-|\.tmp-)p(\d+)s(\d+)n(\d+)-")


class Terminated(BaseException):
    """SIGTERM or SIGHUP reached kport; raised in the main thread so that cleanup runs. Not an
    Exception: nothing that catches errors may swallow it. The exit code is 128 + signum."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def raise_on_termination() -> None:
    """Turn SIGTERM and SIGHUP into Terminated in this (main) thread from now on. Once: a
    second one while the first unwinds is let pass, so cleanup is not cut short. Does
    nothing outside the main thread, where Python cannot set handlers."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _let_pass)
        raise Terminated(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def _let_pass(signum, frame) -> None:
    """A handler that does nothing (not SIG_IGN, which programs started later would inherit)."""


def stopped_by(err: BaseException) -> Terminated | None:
    """The Terminated that ``err`` is, or holds (an exception group, as anyio raises), or None."""
    if isinstance(err, Terminated):
        return err
    if isinstance(err, BaseExceptionGroup):
        for inner in err.exceptions:
            found = stopped_by(inner)
            if found is not None:
                return found
    return None


def _stat_fields(pid: int | str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


@functools.lru_cache(maxsize=4)
def _tag_of(pid: int) -> str:
    fields = _stat_fields("self")
    start = fields[19] if fields and len(fields) > 19 else "0"  # stat field 22: start time
    return f"p{pid}s{start}n{_pid_namespace()}"


def owner_tag() -> str:
    """This process in a file name: ``p<pid>s<start time>n<PID namespace>``."""
    return _tag_of(os.getpid())  # keyed by pid: a forked child gets its own


def _owner_alive(pid: int, start: int, namespace: int) -> bool | None:
    """Whether the process that made an entry still runs; None when it cannot be told (no
    /proc, or another PID namespace, where the number means another process)."""
    if not Path("/proc/self/stat").is_file() or namespace != _pid_namespace():
        return None
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):  # gone, or exited and not yet reaped
        return False
    return len(fields) > 19 and int(fields[19]) == start  # else: the pid was reused


def _stale(entry: os.DirEntry) -> bool:
    found = _OWNED.match(entry.name)
    if found is None:
        return False
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    if info.st_uid != os.getuid():
        return False
    alive = _owner_alive(*(int(g) for g in found.groups()))
    if alive is None:  # an old entry whose pid is no process at all
        if time.time() - info.st_mtime < UNCHECKED_AGE_S:
            return False
        try:
            os.kill(int(found[1]), 0)
            return False
        except ProcessLookupError:
            return True
        except OSError:
            return False
    return not alive


def sweep(*folders: str | Path) -> list[Path]:
    """Remove the entries kport processes that are gone left in ``folders`` (default: the
    temp folder and /dev/shm); returns what was removed. Never an entry of a live process, of
    another user, or one whose name does not carry an owner."""
    roots = folders or (tempfile.gettempdir(), SHARED_MEMORY)
    removed = []
    for root in roots:
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        for entry in entries:
            if not _stale(entry):
                continue
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    path.unlink()
            if not os.path.lexists(path):
                removed.append(path)
    return removed


def temp_folder(prefix: str, dir: str | Path | None = None) -> tempfile.TemporaryDirectory:
    """A TemporaryDirectory named ``<prefix><owner tag>-...`` (``prefix`` like
    ``"kport-judge-"``) in ``dir`` (default: the temp folder), made after sweeping the temp
    folder, /dev/shm and ``dir`` of what dead kport processes left."""
    sweep(*{tempfile.gettempdir(), str(SHARED_MEMORY), str(dir or tempfile.gettempdir())})
    return tempfile.TemporaryDirectory(prefix=f"{prefix}{owner_tag()}-", dir=dir)


def partial_file(folder: Path, suffix: str = "") -> str:
    """A new empty file ``.tmp-<owner tag>-...`` in ``folder`` for output written before it is
    renamed into place, made after sweeping ``folder`` of those dead processes left."""
    folder.mkdir(parents=True, exist_ok=True)
    sweep(folder)
    fd, path = tempfile.mkstemp(dir=folder, prefix=f".tmp-{owner_tag()}-", suffix=suffix)
    os.close(fd)
    return path

