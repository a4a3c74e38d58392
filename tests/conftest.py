"""Test-wide set-up: every test runs against a throwaway KPORT_HOME, never the user's."""

import os
import shutil
import tempfile

import pytest

# Set before any kport module reads settings: a home per test process (each xdist worker makes
# its own); tests that check isolation make their own.
os.environ["KPORT_HOME"] = tempfile.mkdtemp(prefix="kport-test-home-")
_RUN_FOLDERS = [os.environ["KPORT_HOME"]]  # what this process made: removed when it ends
for _var in ("KPORT_CXX", "KPORT_MODEL", "KPORT_BASE_URL", "KPORT_CHROMA_URL"):
    os.environ.pop(_var, None)
# One build cache for the whole run, workers and the homes tests make included, so a kernel is
# compiled once per run, not once per test (entries are content-keyed and written atomically).
# The first process to load this file (xdist's controller) makes it; workers inherit it.
# KPORT_TEST_BUILD_CACHE names a folder kept between runs (a CI cache) instead.
if "KPORT_TEST_RUN_BUILD_CACHE" not in os.environ:
    os.environ["KPORT_TEST_RUN_BUILD_CACHE"] = os.environ.get("KPORT_TEST_BUILD_CACHE") or ""
    if not os.environ["KPORT_TEST_RUN_BUILD_CACHE"]:
        _RUN_FOLDERS.append(tempfile.mkdtemp(prefix="kport-test-build-"))
        os.environ["KPORT_TEST_RUN_BUILD_CACHE"] = _RUN_FOLDERS[-1]
os.environ["KPORT_BUILD_CACHE"] = os.environ["KPORT_TEST_RUN_BUILD_CACHE"]
# The same for KB document vectors (kb/embed.py VectorCache): the knowledge base is embedded
# once per run, not once per worker and test that builds it.
if "KPORT_TEST_RUN_EMBED_CACHE" not in os.environ:
    _RUN_FOLDERS.append(tempfile.mkdtemp(prefix="kport-test-embed-"))
    os.environ["KPORT_TEST_RUN_EMBED_CACHE"] = _RUN_FOLDERS[-1]
os.environ["KPORT_EMBED_CACHE"] = os.environ["KPORT_TEST_RUN_EMBED_CACHE"]


def pytest_unconfigure(config):
    for folder in _RUN_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fresh_home(tmp_path, monkeypatch):
    """A KPORT_HOME of the test's own, its build cache in it (cold)."""
    home = tmp_path / "home"
    monkeypatch.setenv("KPORT_HOME", str(home))
    monkeypatch.delenv("KPORT_BUILD_CACHE", raising=False)
    return home
