"""Where the OS gives no jail (here: no `bwrap` on PATH), kport says so and refuses to run
outside code unless the user opts in; opted in, the simulator host still locks itself down and
every record says what the candidate ran in."""

import json
import os

import pytest

from tests.cli import kport
from tests.sandbox.attack_corpus import ATTACKS, SAXPY, Attack, materialize


@pytest.fixture
def no_jail(tmp_path):
    """An environment whose PATH holds no bubblewrap (nor anything else)."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "KPORT_SIM_TIMEOUT": "10"}
    env.pop("KPORT_UNSANDBOXED", None)
    return env


def test_doctor_reports_the_isolation_in_force(no_jail):
    jailed = json.loads(kport("doctor", "--json", env={**os.environ}).stdout)["isolation"]
    assert jailed["jailed"] and "net" in jailed["namespaces"] and jailed["seccomp"]
    assert jailed["landlock_abi"] >= 1  # this kernel has Landlock; CI's does too
    proc = kport("doctor", "--json", env=no_jail)
    bare = json.loads(proc.stdout)
    assert proc.returncode == 1 and not bare["isolation"]["jailed"]
    assert "bubblewrap" in bare["isolation"]["problem"]
    row = next(c for c in bare["checks"] if c["name"] == "isolation")
    assert not row["ok"] and "KPORT_UNSANDBOXED" in row["hint"]


def test_without_a_jail_outside_code_is_refused_with_what_to_do(no_jail, tmp_path):
    port = str(SAXPY / "port.metal")
    for args in (["check", str(SAXPY), "--metal", port],
                 ["eval", "001", "--small", "--out", str(tmp_path / "run")],
                 ["sim", str(ATTACKS / "cuda" / "infinite_loop.cu"), "--kernel", "k", "--grid",
                  "1", "--block", "4", "--arg", "y=zeros:float32:4"]):
        proc = kport(*args, env=no_jail)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "bubblewrap" in proc.stderr and "--unsandboxed" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_opted_in_the_run_goes_on_and_says_it_had_no_jail(no_jail):
    proc = kport("check", str(SAXPY), "--metal", str(SAXPY / "port.metal"), "--json",
                 "--unsandboxed", env=no_jail)
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["accepted"] and verdict["isolation"].startswith("NO JAIL (unsandboxed")


def test_opted_in_the_host_still_stops_forbidden_calls(no_jail, traces, tmp_path):
    source = ATTACKS / "cuda" / "system_shell.cu"
    attack = Attack("system_shell", "", "sandbox", (source,))
    (filled,) = materialize(attack, traces, tmp_path / "attack")
    proc = kport("sim", str(filled), "--kernel", "k", "--grid", "1", "--block", "4", "--arg",
                 "y=zeros:float32:4", "--json", env={**no_jail, "KPORT_UNSANDBOXED": "1"})
    out = json.loads(proc.stdout)
    assert any(f.startswith("sandbox:") for f in out["findings"]), out
    assert traces.found() == []


def test_eval_and_its_report_record_a_run_without_the_jail(no_jail, tmp_path):
    out = tmp_path / "run"
    proc = kport("eval", "001", "--small", "--out", str(out), "--unsandboxed", env=no_jail)
    assert proc.returncode == 0, proc.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["isolation"].startswith("NO JAIL (unsandboxed")
    proc = kport("report", str(out), env=no_jail)
    assert proc.returncode == 0, proc.stderr
    assert "isolation: NO JAIL (unsandboxed" in (out / "report.md").read_text()
