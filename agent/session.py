"""Run the porting graph with checkpoints: every step is saved by langgraph's SqliteSaver under
``settings.sessions_dir``, so a run that was stopped (killed, interrupted, out of budget for the
day) resumes from its last step by thread id. Also: adding an accepted port to the KB.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

from agent.graph import build_graph, recursion_limit
from corpus.candidate import Candidate
from corpus.port_check import case_with_port
from kb.ingest import case_chunks
from kb.store import KBStore
from runners.errors import KportError
from runners.lifetime import temp_folder

CHECKPOINTS = "port-checkpoints.sqlite"


@dataclass
class SessionResult:
    """A run's final (or paused) state values, its thread id, and whether it finished."""

    thread_id: str
    values: dict
    finished: bool
    resumed: bool


def new_thread_id(kernel: str) -> str:
    """A fresh thread id naming the kernel: ``port-<kernel>-<10 hex>``."""
    name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in kernel.split("<")[0])
    return f"port-{name}-{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def checkpointer(settings):
    """A SqliteSaver on ``sessions_dir/port-checkpoints.sqlite`` (closed on exit); KportError
    when the file cannot be opened."""
    path = Path(settings.sessions_dir) / CHECKPOINTS
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False)
    except (OSError, sqlite3.Error) as err:
        raise KportError(f"{path}: cannot open the checkpoint database ({err}); check "
                         "KPORT_HOME") from None
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def run_port(ctx, settings, thread_id: str, *, interrupt_after: list[str] | None = None,
             on_step=None) -> SessionResult:
    """Run the port of ``ctx`` on ``thread_id``: a new thread starts from the top, an
    unfinished one resumes after its last saved step, a finished one returns its final state.
    ``ctx`` must describe the same kernel and case as the thread's first run. ``on_step(node,
    update)`` is called after each step, as it happens (progress for `kport chat`)."""
    with checkpointer(settings) as saver:
        graph = build_graph(saver, interrupt_after=interrupt_after)
        config = {"configurable": {"thread_id": thread_id},
                  "recursion_limit": recursion_limit(ctx.budget)}
        snap = graph.get_state(config)
        resumed = bool(snap.values)
        if resumed and snap.values.get("kernel") not in (None, ctx.kernel.split("<")[0]):
            raise KportError(f"thread {thread_id} ports {snap.values['kernel']!r}, not "
                             f"{ctx.kernel!r}; give another --thread")
        if not resumed:
            _drive(graph, {"kernel": ctx.kernel.split("<")[0]}, config, ctx, on_step)
        elif unfinished(snap):
            _drive(graph, None, config, ctx, on_step)
        snap = graph.get_state(config)
        return SessionResult(thread_id, dict(snap.values), not unfinished(snap), resumed)


def unfinished(snap) -> bool:
    """Whether a thread has steps left. ``snap.next`` alone is not enough: a run killed after a
    step's results were saved but before the step's checkpoint lists that step among
    ``snap.tasks`` (with its results) and not in ``next``; running on applies them."""
    return bool(snap.next) or bool(snap.tasks)


def _drive(graph, start, config, ctx, on_step) -> None:
    # durability="sync": each step's checkpoint is on disk before the next step starts, so a
    # kill loses at most the step that was running.
    if on_step is None:
        graph.invoke(start, config, context=ctx, durability="sync")
        return
    for update in graph.stream(start, config, context=ctx, stream_mode="updates",
                               durability="sync"):
        for node, values in update.items():
            if not node.startswith("__"):  # __interrupt__ and the like are not steps
                on_step(node, values or {})


def learn(case, candidate: Candidate, settings) -> dict:
    """Add an accepted port to the KB as a CUDA/Metal analogue pair (creating the KB if there
    is none); returns the store's counts (added, present). Raises KBError when the store
    cannot be written."""
    with temp_folder("kport-learn-") as tmp:
        port = case_with_port(case, Path(tmp) / case.id, candidate)
        chunks = case_chunks(port, source="kport-port")
        if not chunks:
            raise KportError(f"{case.id}: the kernel was not found for the KB pair")
        return KBStore.from_settings(settings, create=True).add(chunks)
