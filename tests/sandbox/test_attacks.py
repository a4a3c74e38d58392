"""Every attack of the corpus is refused and leaves no trace: through `kport check` and
`kport sim` (real CLI processes), and once more with the allow-list switched off, so that
escapes meet the jail alone (namespaces, read-only view, Landlock, seccomp)."""

import json

import numpy as np
import pytest

from runners.metal_sim import allowlist, expanded
from runners.simbuild import Vetting
from tests.cli import kport
from tests.sandbox.attack_corpus import SAXPY, cuda_attacks, materialize, metal_attacks

METAL = metal_attacks()
pytestmark = pytest.mark.slow
CUDA = cuda_attacks()




def test_the_corpus_is_big_enough():
    escapes = [a for a in METAL if "goal: escape" in a.files[0].read_text()]
    assert len(METAL) + len(CUDA) >= 40 and len(escapes) >= 20 and len(CUDA) >= 20


@pytest.mark.parametrize("attack", METAL, ids=lambda a: a.name)
def test_kport_check_refuses_metal_attacks(attack, traces, tmp_path):
    files = materialize(attack, traces, tmp_path / "attack")
    header = ["--header", str(files[1])] if len(files) > 1 else []
    proc = kport("check", str(SAXPY), "--metal", str(files[0]), *header, "--timeout", "60")
    assert proc.returncode == 1 and "REJECTED" in proc.stdout, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert traces.found() == []


@pytest.mark.parametrize("attack", METAL, ids=lambda a: a.name)
def test_kport_sim_refuses_metal_attacks(attack, traces, tmp_path):
    files = materialize(attack, traces, tmp_path / "attack")
    rng = np.random.default_rng(0)
    for name in ("x", "y"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal(100).astype(np.float32))
    header = ["--header", str(files[1])] if len(files) > 1 else []
    proc = kport("sim", str(files[0]), "--input", f"x={tmp_path / 'x.npy'}", "--input",
                 f"y={tmp_path / 'y.npy'}", "--input", "a=float32:2.5", "--input", "n=int32:100",
                 "--output", "y_out=float32:100", "--grid", "128", "--threadgroup", "64",
                 *header, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert not out["ok"] and (out["diagnostics"] or out["findings"])
    assert traces.found() == []


def _expected(expect: str, out: dict) -> bool:
    findings = " ".join(out["findings"])
    if expect == "sandbox":
        return "sandbox:" in findings
    if expect == "timeout":
        return "timeout:" in findings
    if expect == "crash":
        return bool(out["findings"])
    if expect == "compile":
        return any(": error:" in d for d in out["diagnostics"])
    if expect == "no-effect":  # the probe ran and saw nothing of the host
        return out["ok"] and out["outputs"]["y"] == [0.0] * 4
    raise AssertionError(f"unknown expectation {expect!r}")


@pytest.mark.parametrize("attack", CUDA, ids=lambda a: a.name)
def test_kport_sim_contains_cuda_attacks(attack, traces, tmp_path):
    (source,) = materialize(attack, traces, tmp_path / "attack")
    proc = kport("sim", str(source), "--kernel", "k", "--grid", "1", "--block", "4", "--arg",
                 "y=zeros:float32:4", "--json")
    out = json.loads(proc.stdout)
    assert _expected(attack.expect, out), out
    assert "root:" not in proc.stdout  # nothing of /etc/passwd in any message
    assert traces.found() == []


ESCAPES = [a for a in METAL if "goal: escape" in a.files[0].read_text()]


@pytest.mark.parametrize("attack", ESCAPES, ids=lambda a: a.name)
def test_the_jail_alone_contains_metal_escapes(attack, traces, tmp_path, monkeypatch):
    """The allow-list off (as if an escape got past it): the jail must still hold."""
    import mlx.core as mx

    from runners.metal_sim import metal_kernel

    monkeypatch.setattr(allowlist, "source_problems", lambda text, file, **kw: [])
    monkeypatch.setattr(expanded, "vetting", lambda files, main, tu, pending=None: Vetting(
        "off", tu, lambda text: [], lambda lib: []))
    files = materialize(attack, traces, tmp_path / "attack")
    k = metal_kernel("saxpy", ["x", "y", "a", "n"], ["y_out"], files[0].read_text(),
                     files[1].read_text() if len(files) > 1 else "")
    x = mx.array(np.arange(100, dtype=np.float32))
    run = k.launch(inputs=[x, x, mx.array(2.5), mx.array(100, dtype=mx.int32)],
                   output_shapes=[(100,)], output_dtypes=[mx.float32], grid=(128, 1, 1),
                   threadgroup=(64, 1, 1))
    # refused, stopped by the sandbox, or ran having reached nothing (a read Landlock denied,
    # a probe that found no file): whichever, the machine must show no trace of it
    assert not run.compiled or run.findings or run.outputs
    assert "root:" not in " ".join(str(d) for d in run.diagnostics)
    assert traces.found() == []
