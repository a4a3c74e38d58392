"""The one way tests run the `kport` CLI as a user does: ``python -m agent.cli ARGS`` in a real
subprocess, with this checkout's code first on the path."""

from __future__ import annotations

import importlib.util
import os
import re
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


def load_package(folder: Path, name: str):
    """A generated package's kernel.py as a module (``name`` keeps modules apart)."""
    safe = re.sub(r"\W", "_", name)
    spec = importlib.util.spec_from_file_location(f"kport_pkg_{safe}", Path(folder) / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
