"""Where chat sessions live: one SQLite file, ``sessions_dir/chat-sessions.sqlite``, holding
langgraph's checkpoints (one thread per session; the thread id is the session id) and an index
table, ``kport_chat_sessions``, that `/sessions`, `--list` and `--resume` read. Each session
also has a folder, ``sessions_dir/chat/<id>/``, for what kport writes for itself (a guessed
case, files handed to $EDITOR); files for the user are written only after approval.
"""

from __future__ import annotations

import contextlib
import fcntl
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from runners.errors import KportError

CHAT_DB = "chat-sessions.sqlite"
_SCHEMA = """CREATE TABLE IF NOT EXISTS kport_chat_sessions (
    id TEXT PRIMARY KEY, created REAL NOT NULL, updated REAL NOT NULL,
    file TEXT, kernel TEXT, turns INTEGER NOT NULL DEFAULT 0, last TEXT)"""


@dataclass(frozen=True)
class SessionRow:
    """One session as the index knows it: id, times (epoch seconds), the loaded file and
    kernel, turns taken and the last command."""

    id: str
    created: float
    updated: float
    file: str | None
    kernel: str | None
    turns: int
    last: str | None

    def line(self) -> str:
        """One line for listings: id, last activity, kernel, turns, last command."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.updated))
        what = f"{self.kernel} ({self.file})" if self.kernel else "no kernel loaded"
        last = f"; last: {self.last}" if self.last else ""
        return f"{self.id}  {when}  {what}  {self.turns} turn(s){last}"


class SessionIndex:
    """The index table of sessions (same database as the checkpoints)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        with conn:
            conn.execute(_SCHEMA)

    def create(self) -> str:
        """A new session id, registered now: ``chat-<8 hex>``."""
        sid = f"chat-{uuid.uuid4().hex[:8]}"
        now = time.time()
        with self.conn:
            self.conn.execute("INSERT INTO kport_chat_sessions (id, created, updated) "
                              "VALUES (?, ?, ?)", (sid, now, now))
        return sid

    def record_turn(self, sid: str, *, file: str | None, kernel: str | None,
                    last: str) -> None:
        """Count one finished turn of ``sid`` and remember what it has loaded."""
        with self.conn:
            self.conn.execute("UPDATE kport_chat_sessions SET updated = ?, file = ?, "
                              "kernel = ?, turns = turns + 1, last = ? WHERE id = ?",
                              (time.time(), file, kernel, last[:80], sid))

    def rows(self) -> list[SessionRow]:
        """Every session, most recently used first."""
        cur = self.conn.execute("SELECT id, created, updated, file, kernel, turns, last FROM "
                                "kport_chat_sessions ORDER BY updated DESC, created DESC")
        return [SessionRow(*row) for row in cur.fetchall()]

    def resolve(self, ref: str) -> SessionRow:
        """The session ``ref`` names: an id, a unique prefix of one, or ``last``. KportError
        saying which sessions exist otherwise."""
        rows = self.rows()
        if not rows:
            raise KportError("there are no chat sessions yet; start one with `kport chat "
                             "FILE.cu`")
        if ref == "last":
            return rows[0]
        found = [r for r in rows if r.id == ref] or [r for r in rows if r.id.startswith(ref)]
        if len(found) == 1:
            return found[0]
        known = ", ".join(r.id for r in rows[:8])
        if found:
            raise KportError(f"session {ref!r} is ambiguous: {', '.join(r.id for r in found)}")
        raise KportError(f"no chat session {ref!r}; recent ones: {known} "
                         "(`kport chat --list` shows all)")


def session_dir(settings, sid: str) -> Path:
    """kport's own folder for session ``sid`` (created)."""
    path = Path(settings.sessions_dir) / "chat" / sid
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def hold(settings, sid: str):
    """Hold session ``sid`` for this process (an flock, released even by SIGKILL); KportError
    when another process holds it, as two terminals on one session would interleave turns."""
    fh = (session_dir(settings, sid) / ".lock").open("a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise KportError(f"session {sid} is open in another terminal; leave it there (/quit) "
                         "or start a new session") from None
    try:
        yield
    finally:
        fh.close()


@contextlib.contextmanager
def open_sessions(settings):
    """(SqliteSaver, SessionIndex) on the chat database, closed on exit. KportError when the
    database cannot be opened (a bad KPORT_HOME, a file that is not SQLite)."""
    # lazy: langgraph is slow to import (~0.3 s); hold() and session_dir() do without it
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(settings.sessions_dir) / CHAT_DB
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        index = SessionIndex(conn)
    except (OSError, sqlite3.Error) as err:
        raise KportError(f"{path}: cannot open the chat session database ({err}); check "
                         "KPORT_HOME, or move the file away to start afresh") from None
    try:
        yield SqliteSaver(conn), index
    finally:
        conn.close()
