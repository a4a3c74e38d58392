"""The one way tests run the `kport` CLI as a user does: ``python -m agent.cli ARGS`` in a real
subprocess, with this checkout's code first on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KPORT = [sys.executable, "-m", "agent.cli"]


def kport_env(env: dict | None = None) -> dict[str, str]:
    """The environment a kport child gets: this process's, this checkout first on PYTHONPATH,
    then ``env`` (variables added or replaced)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **(env or {})}


def kport(*args: str, env: dict | None = None, cwd: Path = ROOT, timeout: float = 600,
          input: str | None = None) -> subprocess.CompletedProcess:
    """`kport ARGS...`: text output captured, ``env`` added to the environment."""
    return subprocess.run([*KPORT, *args], capture_output=True, text=True, cwd=cwd,
                          env=kport_env(env), timeout=timeout, input=input)
