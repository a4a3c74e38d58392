"""The cheat-proof harness against adversarial candidates (shared/reference/evaluator-hardening.md
lists the 21 cases; docs/harness.md maps each to the check and fixture below). Every fixture
must be rejected for its reason; the expert port must be accepted."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from agent.harness import judge, scrubbed_env
from corpus.cases import load_case
from tests.cli import KPORT

ROOT = Path(__file__).parents[2]
SAXPY = load_case(ROOT / "corpus" / "cases" / "001_saxpy")
FIX = Path(__file__).parent / "fixtures"

# fixture -> a phrase the rejection must contain
REJECTED = {
    "zeros": "is constant while the reference is not",                 # 1
    "constant": "is constant while the reference is not",              # 1
    "returns_input": "is a copy of the input 'y'",                     # 2
    # 3, 8: y is updated in place, so the half never written keeps y's input and differs
    "partial": "wrong result",
    "mutates_input": "write to input buffer 'x'",                      # 5
    "shape_special_case": "sizes {'n': 997}",                          # 7
    "ignores_inputs": "wrong result",                                  # 6, 8
    "nan_output": "NaN in the result",                                 # 17
    "precision_downgrade": "wrong result",                             # 18
    "hang": "timeout",                                                 # 13
    "huge_allocation": "threadgroup memory",                           # 14
    "out_of_bounds": "out_of_bounds",                                  # 15
    "race": "race",                                                    # 16
    "escape": "static keyword",                                        # 19
    "static_state": "[storage]",                                       # 6, 21
    "spoof_channel": "undeclared identifier 'printf'",                 # 20
    "timer_tamper": "incomplete type 'struct timespec'",              # 9
    "reads_foreign_memory": "simulator",                               # 4
}


@pytest.fixture(autouse=True)
def short_sim_timeout(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_TIMEOUT", "10")


def test_the_expert_port_is_accepted():
    v = judge(SAXPY, (SAXPY.folder / "port.metal").read_text())
    assert v.accepted, v.reasons
    assert len(v.runs) >= 3 * len(SAXPY.size_sets())


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_adversarial_candidates_are_rejected(name):
    header = FIX / f"{name}_header.metal"
    v = judge(SAXPY, (FIX / f"{name}.metal").read_text(),
              header.read_text() if header.is_file() else "", timeout=60)
    assert not v.accepted
    assert any(REJECTED[name].lower() in r.lower() for r in v.reasons), v.reasons


def test_no_credential_reaches_the_candidate(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never")
    monkeypatch.setenv("KPORT_MODEL", "openai:gpt-x")
    env = scrubbed_env()
    assert "OPENAI_API_KEY" not in env and "KPORT_MODEL" not in env and "PATH" in env


def test_kport_check_exit_codes_and_json():
    base = [*KPORT, "check", str(SAXPY.folder)]
    env = {**os.environ, "KPORT_SIM_TIMEOUT": "10"}
    ok = subprocess.run([*base, "--metal", str(SAXPY.folder / "port.metal"), "--json"],
                        capture_output=True, text=True, env=env, timeout=600)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["accepted"] is True
    bad = subprocess.run([*base, "--metal", str(FIX / "zeros.metal")], capture_output=True,
                         text=True, env=env, timeout=600)
    assert bad.returncode == 1 and "REJECTED" in bad.stdout and "constant" in bad.stdout
    usage = subprocess.run([*base, "--metal", str(FIX / "missing.metal")], capture_output=True,
                           text=True, env=env, timeout=60)
    assert usage.returncode == 2 and "cannot read" in usage.stderr


def test_implausible_speed_is_flagged_against_the_chip_roofline():
    from agent.harness import implausible_speed

    # 1 GiB read + written on an M1 (68.25 GB/s): at least ~31 ms
    assert "roofline" in implausible_speed(1e-3, 2 * 2**30, 0, "M1")
    assert implausible_speed(0.05, 2 * 2**30, 0, "M1") == ""


def test_library_fallbacks_in_python_candidates_are_found():
    from corpus.static_checks import python_fallback_findings

    fb = python_fallback_findings((FIX / "fallback_kernel.py").read_text())
    assert any("try/except" in f for f in fb) and any("`softmax`" in f for f in fb)
    lib = python_fallback_findings((FIX / "library_only_kernel.py").read_text())
    assert "no metal_kernel call" in lib[0] and any("`matmul`" in f for f in lib)
    rr = python_fallback_findings((FIX / "reads_reference_kernel.py").read_text())
    assert any("imports gc" in f for f in rr)                                     # case 4
    de = python_fallback_findings((FIX / "deferred_kernel.py").read_text())
    assert any("imports threading" in f and "after the call" in f for f in de)    # case 10
    ok = ("import mlx.core as mx\nK = mx.fast.metal_kernel(name='k', input_names=['x'], "
          "output_names=['y'], source='y[0] = x[0];')\ndef run(x):\n    return {'y': K("
          "inputs=[x])[0]}\n")
    assert python_fallback_findings(ok) == []


def test_a_package_kport_port_writes_passes_the_python_checks(tmp_path):
    from corpus.static_checks import python_fallback_findings

    out = tmp_path / "pkg"
    proc = subprocess.run([*KPORT, "port",
                           str(SAXPY.folder / "kernel.cu"), "--case", str(SAXPY.folder),
                           "--out", str(out), "--offline"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert python_fallback_findings((out / "kernel.py").read_text()) == []
