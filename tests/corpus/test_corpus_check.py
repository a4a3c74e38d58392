"""The corpus checker catches a wrong port and a wrong CUDA kernel, and `kport corpus` exits
accordingly."""

import os
import shutil
import subprocess
from pathlib import Path

from corpus.cases import load_case
from corpus.check import check_case
from tests.cli import KPORT

EXAMPLE = Path(__file__).resolve().parents[2] / "corpus" / "cases" / "001_saxpy"


def _copy(tmp_path):
    folder = tmp_path / "cases" / "001_saxpy"
    shutil.copytree(EXAMPLE, folder)
    return folder


def test_a_correct_case_passes_every_size_and_seed(tmp_path):
    outcomes = check_case(load_case(_copy(tmp_path)))
    assert len(outcomes) == 6 and all(o.ok for o in outcomes)
    assert {o.cuda for o in outcomes} == {"ok"} and {o.metal for o in outcomes} == {"ok"}


def test_a_wrong_port_fails(tmp_path):
    folder = _copy(tmp_path)
    port = folder / "port.metal"
    port.write_text(port.read_text().replace("fma(a, x[i], y[i])", "a * x[i]"))
    outcomes = check_case(load_case(folder), seeds=1)
    assert all(o.metal == "FAIL" for o in outcomes)
    assert "elements differ" in outcomes[0].notes[0]


def test_a_port_that_skips_the_tail_fails(tmp_path):
    """saxpy updates y in place: the element it skips keeps y's input, not a*x+y."""
    folder = _copy(tmp_path)
    port = folder / "port.metal"
    port.write_text(port.read_text().replace("if (i < uint(n))", "if (i + 1 < uint(n))"))
    outcomes = check_case(load_case(folder), seeds=1)
    assert all(o.metal == "FAIL" for o in outcomes)
    assert all("1 of" in " ".join(o.notes) and "elements differ" in " ".join(o.notes)
               for o in outcomes)


def test_a_cuda_kernel_that_overruns_fails_even_if_numbers_match(tmp_path):
    folder = _copy(tmp_path)
    cu = folder / "kernel.cu"
    cu.write_text(cu.read_text().replace("if (i < n)", "if (i <= n)"))  # writes y[n] too
    outcomes = check_case(load_case(folder), seeds=1)
    assert any(o.cuda == "error" and "out_of_bounds" in " ".join(o.notes) for o in outcomes)


def test_cli_exit_codes(tmp_path):
    folder = _copy(tmp_path)
    env = dict(os.environ)
    run = [*KPORT, "corpus"]
    ok = subprocess.run([*run, "check", "--root", str(folder.parent), "--seeds", "1"],
                        capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    port = folder / "port.metal"
    port.write_text(port.read_text().replace("fma(a, x[i], y[i])", "x[i]"))
    bad = subprocess.run([*run, "check", "--root", str(folder.parent), "--seeds", "1"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 1 and "FAIL" in bad.stdout
    missing = subprocess.run([*run, "check", "042", "--root", str(folder.parent)],
                             capture_output=True, text=True, env=env, timeout=300)
    assert missing.returncode == 2 and "no case '042'" in missing.stderr
