"""A knowledge base built once per test session (rules, architecture, fixes, corpus pairs), in
its own KPORT_HOME; tests read it and never write to it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def built_home(tmp_path_factory) -> Path:
    from kb.chunks import arch_chunks, fix_chunks, rule_chunks
    from kb.ingest import corpus_chunks
    from kb.store import KBStore

    home = tmp_path_factory.mktemp("kb-home")
    store = KBStore(home / "kb", create=True)
    store.add(rule_chunks() + arch_chunks() + fix_chunks() + corpus_chunks())
    return home


@pytest.fixture(scope="session")
def built_store(built_home):
    from kb.store import KBStore

    return KBStore(built_home / "kb")


def kport(*args, home: Path | None = None, timeout: int = 300, **kw):
    """Run the real CLI in a child process, as a user would."""
    env = {**os.environ, **({"KPORT_HOME": str(home)} if home else {})}
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, **kw)


@pytest.fixture(scope="session")
def cli():
    """The real ``kport`` CLI in a child process: ``cli(*args, home=...)``."""
    return kport
