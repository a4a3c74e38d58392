"""What an attack may leave behind, watched from outside: a canary folder (a secret to read, a
place to write), a canary file in KPORT_HOME, a listener on 127.0.0.1, a sentinel process to
signal, the parent's environment, files that must not change, and processes that outlive the
run. ``Traces.found()`` lists every trace seen; an attack must leave none.

Attack sources name these with placeholders that ``Traces.fill`` replaces: @CANARY@ (the
canary folder), @SECRET@ (a file in it), @HOMECANARY@ (a file in KPORT_HOME), @PORT@ (the
listener's port), @SENTINEL@ (the sentinel's pid), @NONCE@ (a word any process an attack
starts carries in its command line).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import secrets
import socket
import struct
import subprocess
import time
from pathlib import Path

_IN_ACCESS, _IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x1, 0x2, 0x4, 0x8
_IN_OPEN, _IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x20, 0x40, 0x80, 0x100, 0x200
_WATCH = (_IN_ACCESS | _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_OPEN | _IN_MOVED_FROM
          | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE)
_NAMES = {_IN_ACCESS: "read", _IN_MODIFY: "written", _IN_ATTRIB: "attributes changed",
          _IN_CLOSE_WRITE: "written", _IN_OPEN: "opened", _IN_MOVED_FROM: "moved away",
          _IN_MOVED_TO: "moved in", _IN_CREATE: "created", _IN_DELETE: "deleted"}
# How long an orphaned jail may take to die (see Traces._leftovers).
ORPHAN_GRACE_S = 10.0
# Command lines of kport's jailed children: none may be alive once a run has returned.
_OURS = ("kport-simhost", "reference_child.py", "kport-launch-", "kport-build-")


class Traces:
    """Set up the watches (before the attack), then ``found()`` (after it)."""

    def __init__(self, root: Path, home: Path, keep: list[Path] = ()):
        self.canary = root / "canary"
        self.canary.mkdir(parents=True)
        self.secret = self.canary / "secret.txt"
        self.secret.write_text("the canary's secret\n")
        home.mkdir(parents=True, exist_ok=True)
        self.home_canary = home / "canary.txt"
        self.home_canary.write_text("KPORT_HOME's secret\n")
        self.nonce = "kpattack" + secrets.token_hex(6)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.sentinel = subprocess.Popen(["sleep", "3600"])
        self.env = _environment()
        self.kept = {p: _digest(p) for root_ in keep for p in _files(root_)}
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        self.watches = {libc.inotify_add_watch(self.fd, str(self.canary).encode(), _WATCH):
                        self.canary,
                        libc.inotify_add_watch(self.fd, str(self.home_canary).encode(), _WATCH):
                        self.home_canary}

    def fill(self, text: str) -> str:
        """``text`` with the placeholders replaced."""
        for key, value in {"@CANARY@": self.canary, "@SECRET@": self.secret,
                           "@HOMECANARY@": self.home_canary, "@PORT@": self.port,
                           "@SENTINEL@": self.sentinel.pid, "@NONCE@": self.nonce}.items():
            text = text.replace(key, str(value))
        return text

    def found(self) -> list[str]:
        """Every trace an attack left; [] when it left none."""
        out = [f"{path.name if path == self.home_canary else path}: {what}"
               for path, what in self._events()]
        extra = sorted(p.name for p in self.canary.iterdir() if p != self.secret)
        if extra:
            out.append(f"files appeared in the canary folder: {extra}")
        if self.secret.read_text() != "the canary's secret\n":
            out.append("the canary's secret was changed")
        self._events()  # the two looks just taken are this watch's own
        try:
            conn, peer = self.listener.accept()
            conn.close()
            out.append(f"the listener on 127.0.0.1:{self.port} got a connection from {peer}")
        except BlockingIOError:
            pass
        if self.sentinel.poll() is not None:
            out.append(f"the sentinel process was killed (exit {self.sentinel.returncode})")
        now = _environment()
        if now != self.env:
            keys = sorted(k for k in now.keys() | self.env.keys() if now.get(k) != self.env.get(k))
            out.append(f"the parent's environment changed: {', '.join(keys)}")
        changed = [str(p) for p, d in self.kept.items() if _digest(p) != d]
        if changed:
            out.append(f"files changed: {changed}")
        out += [f"a process outlived the run: {cmd}" for cmd in self._leftovers()]
        return out

    def _events(self) -> list[tuple[Path, str]]:
        events, data = [], b""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        while len(data) >= 16:
            wd, mask, _, size = struct.unpack_from("iIII", data)
            name = data[16:16 + size].rstrip(b"\0").decode(errors="replace")
            data = data[16 + size:]
            path = self.watches.get(wd, Path("?"))
            for bit, what in _NAMES.items():
                if mask & bit:
                    events.append((path / name if name else path, what))
        return events

    def _leftovers(self) -> list[str]:
        """Live processes an attack started (its nonce in their command line), at once; and
        kport's jailed children whose kport is gone (orphans: no Python process above them),
        if still alive after ORPHAN_GRACE_S. The grace is for other tests running meanwhile:
        a test that SIGKILLs its kport leaves a jail that --die-with-parent tears down a moment
        later, and that jail names no nonce, so it cannot be told from this attack's."""
        started, orphans = self._live()
        deadline = time.monotonic() + ORPHAN_GRACE_S
        while orphans and time.monotonic() < deadline:
            time.sleep(0.2)
            orphans = {pid: cmd for pid, cmd in self._live()[1].items() if pid in orphans}
        return started + list(orphans.values())

    def _live(self) -> tuple[list[str], dict[int, str]]:
        """(commands holding the nonce, {pid: command} of orphaned kport jail processes)."""
        table = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.sentinel.pid:
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(entry.name)] = (cmd, fields[0], int(fields[1]))

        def orphan(pid: int) -> bool:
            seen = set()
            while pid in table and pid not in seen and pid > 1:
                seen.add(pid)
                cmd, _, parent = table[pid]
                if "python" in cmd.split(" ")[0]:
                    return False
                pid = parent
            return True

        live = {pid: cmd.strip()[:200] for pid, (cmd, state, _) in table.items() if state != "Z"}
        started = [cmd for cmd in live.values() if self.nonce in cmd]
        return started, {pid: cmd for pid, cmd in live.items() if self.nonce not in cmd
                         and any(m in cmd for m in _OURS) and orphan(pid)}

    def close(self) -> None:
        self.sentinel.kill()
        self.sentinel.wait()
        self.listener.close()
        os.close(self.fd)


def _environment() -> dict[str, str]:
    # pytest itself rewrites PYTEST_CURRENT_TEST between a test's phases
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def _files(root: Path) -> list[Path]:
    return [p for p in sorted(Path(root).rglob("*")) if p.is_file() and
            "__pycache__" not in p.parts]


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"
