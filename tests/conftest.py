"""Test-wide set-up: every test runs against a throwaway KPORT_HOME, never the user's."""

import os
import tempfile

import pytest

# Set before any kport module reads settings. One home per test session keeps the build cache warm
# across tests; tests that check isolation make their own.
os.environ["KPORT_HOME"] = tempfile.mkdtemp(prefix="kport-test-home-")
for _var in ("KPORT_CXX", "KPORT_MODEL", "KPORT_BASE_URL", "KPORT_CHROMA_URL"):
    os.environ.pop(_var, None)


@pytest.fixture
def fresh_home(tmp_path, monkeypatch):
    """A KPORT_HOME of the test's own."""
    home = tmp_path / "home"
    monkeypatch.setenv("KPORT_HOME", str(home))
    return home
