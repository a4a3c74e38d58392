"""Shared by the batch-eval tests: the four cheap corpus cases and a `kport` subprocess runner.

`kport` verbs run in a subprocess here: inside pytest the name ``evals`` is this test package
(tests/evals/__init__.py), so agent.cli's verb table cannot be read in-process."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHEAP = ["001_saxpy", "002_gelu_tanh", "005_bias_add_rows", "006_sum_partials"]


def kport(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`kport ARGS...` in a subprocess from the repository root (text output captured)."""
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
