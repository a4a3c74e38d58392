"""`kport translate` as a user runs it."""

import json
from pathlib import Path

from tests.cli import kport as run_kport

CASE = Path(__file__).parents[2] / "corpus" / "cases" / "012_softmax_online"


def kport(*args):
    return run_kport("translate", *args, timeout=300)


def test_case_driven_json():
    proc = kport(str(CASE / "kernel.cu"), "--case", str(CASE), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["inputs"] == ["x", "n"] and out["outputs"] == ["y"]
    assert out["template"] == {"BLOCK": 256} and out["coverage"] == 1.0
    assert out["grid"][0] == "(rows) * (256)" and out["threadgroup"][0] == "256"
    assert "simd_shuffle_xor" in out["header"] and "threadgroup_barrier" in out["body"]


def test_text_output_reports_coverage_and_todos(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* y) { __nanosleep(5); y[threadIdx.x] = 0.0f; }\n")
    proc = kport(str(src), "--kernel", "k", "--grid", "ceil_div(n, 64), 1", "--block", "64")
    assert proc.returncode == 0, proc.stderr
    assert "coverage: 1 of 2 construct occurrences mapped (50%); 1 KPORT-TODO" in proc.stdout
    assert "TODO k.cu:1: __nanosleep (debug.clock_timing)" in proc.stdout  # file and line
    assert "grid=['(ceil_div(n, 64)) * (64)', '(1) * (1)', '(1) * (1)']" in proc.stdout


def test_errors_exit_2_without_traceback(tmp_path):
    proc = kport(str(CASE / "kernel.cu"), "--kernel", "nope")
    assert proc.returncode == 2 and "no kernel named 'nope'" in proc.stderr
    proc = kport(str(tmp_path / "missing.cu"), "--kernel", "k")
    assert proc.returncode == 2 and "cannot read" in proc.stderr
    proc = kport(str(CASE / "kernel.cu"))
    assert proc.returncode == 2 and "--kernel" in proc.stderr
    for p in (proc,):
        assert "Traceback" not in p.stderr
