"""Where the cases of a batch eval run, behind one small interface: ``map_unordered(fn, items)``
yields ``(item, result, error)`` as each task finishes, in finishing order.

- ``local``: a process pool on this machine (concurrent.futures, spawned workers).
- ``ray``: Ray tasks, one CPU each, on the cluster at ``RAY_ADDRESS`` (Ray's own variable) or,
  without one, a local Ray instance started for the run and stopped after it. Adding an
  executor is a new class here with the same two methods.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from runners.errors import KportError

EXECUTORS = ("local", "ray")
RAY_HINT = "pip install 'kport[ray]'"


class Executor(Protocol):
    name: str

    def map_unordered(self, fn: Callable[[Any], Any], items: Iterable[Any]
                      ) -> Iterator[tuple[Any, Any, str | None]]:
        """Run ``fn(item)`` for every item; yields ``(item, result, None)`` or, when ``fn``
        raised, ``(item, None, "Type: message")`` as each finishes."""
        ...

    def close(self) -> None:
        """Release the workers (and a Ray instance this executor started)."""
        ...


class LocalExecutor:
    """A ProcessPoolExecutor of ``workers`` spawned processes (spawn: no fork of a parent
    that may already run threads, e.g. the progress bar's)."""

    name = "local"

    def __init__(self, workers: int):
        self.workers = workers
        self.pool = cf.ProcessPoolExecutor(max_workers=workers,
                                           mp_context=multiprocessing.get_context("spawn"))

    def map_unordered(self, fn, items):
        """See Executor.map_unordered."""
        futures = {self.pool.submit(fn, item): item for item in items}
        for fut in cf.as_completed(futures):
            err = fut.exception()
            yield futures[fut], None if err else fut.result(), _describe(err) if err else None

    def close(self) -> None:
        """See Executor.close; tasks not started are cancelled."""
        self.pool.shutdown(wait=True, cancel_futures=True)


class RayExecutor:
    """Ray tasks of one CPU each. Uses a Ray already initialised in this process, else connects
    to ``RAY_ADDRESS`` when set, else starts a local instance of ``workers`` CPUs."""

    name = "ray"

    def __init__(self, workers: int):
        try:
            import ray  # lazy: optional (kport[ray]) and slow to import
        except ImportError:
            raise KportError(f"--executor ray needs Ray: {RAY_HINT}") from None
        self.ray, self.started = ray, False
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS") or None
            kwargs = {} if address else {"num_cpus": workers}
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False, **kwargs)
            except ConnectionError as err:
                raise KportError(f"RAY_ADDRESS={address}: cannot connect ({err}); start the "
                                 "cluster (`ray start --head`) or unset RAY_ADDRESS") from None
            self.started = True

    def map_unordered(self, fn, items):
        """See Executor.map_unordered."""
        remote = self.ray.remote(num_cpus=1, max_retries=0)(fn)
        pending = {remote.remote(item): item for item in items}
        while pending:
            done, _ = self.ray.wait(list(pending), num_returns=1)
            for ref in done:
                item = pending.pop(ref)
                try:
                    yield item, self.ray.get(ref), None
                except self.ray.exceptions.RayTaskError as err:
                    yield item, None, _describe(err.cause if err.cause else err)
                except self.ray.exceptions.RayError as err:  # a worker died, lost node...
                    yield item, None, _describe(err)

    def close(self) -> None:
        """See Executor.close; stops the local Ray instance only if this executor started it."""
        if self.started:
            self.ray.shutdown()


def _describe(err: BaseException) -> str:
    lines = str(err).strip().splitlines() or [""]
    tail = f" ... {lines[-1]}" if len(lines) > 1 else ""  # a traceback's last line says what
    return f"{type(err).__name__}: {lines[0][:300]}{tail}"[:600]


def make_executor(name: str, workers: int) -> Executor:
    """The executor called ``name`` with ``workers`` workers; KportError for an unknown name,
    a worker count below 1, or Ray missing."""
    if workers < 1:
        raise KportError(f"--workers {workers}: give at least 1")
    if name == "local":
        return LocalExecutor(workers)
    if name == "ray":
        return RayExecutor(workers)
    raise KportError(f"--executor {name!r}: one of {', '.join(EXECUTORS)}")
