"""A knowledge base built once per test session (rules, architecture, fixes, corpus pairs), in
its own KPORT_HOME; tests read it and never write to it."""

from pathlib import Path

import pytest

from tests.cli import kport as cli_kport


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
    """Run the real CLI in a child process, as a user would (tests/cli.py), in ``home``."""
    return cli_kport(*args, env={"KPORT_HOME": str(home)} if home else None, timeout=timeout,
                     **kw)


@pytest.fixture(scope="session")
def cli():
    """The real ``kport`` CLI in a child process: ``cli(*args, home=...)``."""
    return kport
