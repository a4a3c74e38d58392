"""Fixtures of the sandbox tests: a watch for the traces an attack may leave, and short limits.
The attack corpus itself is read by attack_corpus.py."""

import os
from pathlib import Path

import pytest

from tests.sandbox.attack_corpus import SAXPY
from tests.sandbox.traces import Traces


@pytest.fixture
def traces(tmp_path, short_limits):
    """A fresh watch (taken after the limits are set, so the environment it keeps is the
    test's own)."""
    home = Path(os.environ["KPORT_HOME"])
    watch = Traces(tmp_path / "watch", home, keep=[SAXPY])
    yield watch
    watch.close()


@pytest.fixture(autouse=True)
def short_limits(monkeypatch):
    """Compile-time bombs and hangs end in seconds, not minutes; the build cache stays in
    KPORT_HOME, where the traces watch, not in the run's shared one."""
    monkeypatch.delenv("KPORT_BUILD_CACHE", raising=False)
    monkeypatch.setenv("KPORT_COMPILE_TIMEOUT", "8")
    monkeypatch.setenv("KPORT_SIM_TIMEOUT", "5")
