"""Verdicts and reports say who compiled the candidate: metal_sim's MSL rules off a Mac, and
on a Mac Apple's own compiler first (a kernel it rejects is never accepted)."""

from pathlib import Path

import pytest

from agent.harness import judge
from corpus.cases import load_case
from runners import mlx_metal
from tests.cli import KPORT

SAXPY = Path(__file__).resolve().parents[2] / "corpus" / "cases" / "001_saxpy"


def test_the_verdict_names_the_compiler():
    verdict = judge(load_case(SAXPY), (SAXPY / "port.metal").read_text())
    assert verdict.accepted
    compiler = verdict.as_json()["compiler"]
    if mlx_metal.available():
        assert compiler.startswith("Apple Metal compiler (MLX ")
    else:
        assert "metal_sim only" in compiler and "not Apple's compiler" in compiler


@pytest.mark.skipif(not mlx_metal.available(),
                    reason="needs Apple Silicon with Metal: Apple's compiler is the gate there")
def test_on_a_mac_what_apple_rejects_is_not_accepted():
    # Apple GPUs have no double; whatever metal_sim makes of it, the real compiler decides
    body = ("uint i = thread_position_in_grid.x;\n"
            "if (i < uint(n)) {\n  double t = double(a) * double(x[i]);\n"
            "  y_out[i] = float(t) + y[i];\n}\n")
    verdict = judge(load_case(SAXPY), body)
    assert not verdict.accepted
    assert any("Apple's Metal compiler" in r for r in verdict.reasons), verdict.reasons


def test_the_port_report_names_the_compiler(tmp_path):
    import subprocess

    ran = subprocess.run([*KPORT, "port", str(SAXPY / "kernel.cu"),
                          "--case", str(SAXPY), "--offline", "--no-kb", "--out",
                          str(tmp_path / "pkg")], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    report = (tmp_path / "pkg" / "report.md").read_text()
    assert "- compiled by: " in report
    assert ("Apple Metal compiler" if mlx_metal.available() else "not Apple's compiler") in report
