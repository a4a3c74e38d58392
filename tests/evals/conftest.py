"""Fixtures of the batch-eval tests: one real offline `kport eval` over four cheap corpus cases,
shared by tests/evals/test_eval_runs.py and tests/evals/test_report.py."""

import pytest

from tests.evals.eval_fixtures import CHEAP, kport


@pytest.fixture(scope="session")
def offline_run(tmp_path_factory):
    """(run folder, completed process) of `kport eval CHEAP --workers 2 --seeds 3`."""
    out = tmp_path_factory.mktemp("eval") / "offline"
    proc = kport("eval", *CHEAP, "--workers", "2", "--seeds", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc
