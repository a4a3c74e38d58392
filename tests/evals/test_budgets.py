"""The harness's two budgets: compiling (KPORT_COMPILE_TIMEOUT, per step, tried twice) and
running (``timeout``: the child's start and the run). A verdict never depends on how long the
machine took to compile, and a compile that runs out of time says so."""

import subprocess
from pathlib import Path

import pytest

from corpus.cases import load_case
from corpus.check import make_inputs
from tests.cli import KPORT

pytestmark = pytest.mark.slow  # cold compiles against time budgets (tests/tiers.py)

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "corpus" / "cases" / "001_saxpy"
PORT = (SAXPY / "port.metal").read_text()
# Macros that give the port 10^4 more statements per B(B(S)): a compile of seconds. Honest
# all the same.
HEADER = ("#define A(x) x x x x x x x x x x\n#define B(x) A(A(x))\n"
          "#define S acc = acc * 1.0001f + float(i & 7);\n")


def _slow(blocks: str) -> str:
    """A body whose compile takes seconds and whose run does not: the statements sit in a
    branch no thread takes (the compiler cannot know that)."""
    return ("uint i = thread_position_in_grid.x;\nfloat acc = 0.0f;\n"
            "if (i > uint(n) + 7u) {\n" + blocks + "\n}\n"
            "if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]) + 0.0f * acc;\n")


def _run(body: str, header: str, timeout: float):
    from agent.harness import run_candidate

    case = load_case(SAXPY)
    sizes = case.size_sets()[0]
    return run_candidate(case, body, header, sizes, make_inputs(case, sizes, 1000), timeout)


def test_the_child_finds_the_build_the_parent_made(fresh_home):
    outs, _, record, problem = _run(PORT, "", 60)
    assert not problem and outs, record
    assert record["compiled"] and record["build_cached"], record


def test_compiling_is_not_counted_in_the_run_budget(fresh_home, monkeypatch):
    """A compile slower than the run budget, then a quick run: no 'hang'."""
    import time

    from runners import simbuild

    took = []
    build = simbuild.build_kernel

    def timed(*args, **kw):
        start = time.monotonic()
        try:
            return build(*args, **kw)
        finally:
            took.append(time.monotonic() - start)

    monkeypatch.setattr(simbuild, "build_kernel", timed)
    body = _slow("B(B(S)) B(B(S)) B(B(S)) B(B(S))")
    # 6 s leaves the child's start-up room on a loaded machine; the compile takes longer
    outs, _, record, problem = _run(body, HEADER, 6.0)
    assert not problem and outs and record["build_cached"], (problem, record)
    assert max(took) > 6.0, f"the compile took {took} s: not slower than the run budget"


def test_a_compile_out_of_time_is_tried_twice_and_says_so(fresh_home, monkeypatch):
    from runners import simbuild

    monkeypatch.setenv("KPORT_COMPILE_TIMEOUT", "1")
    tries = []
    jailed = simbuild._jailed_build

    def counted(*args, **kw):
        tries.append(1)
        return jailed(*args, **kw)

    monkeypatch.setattr(simbuild, "_jailed_build", counted)
    outs, _, record, problem = _run(_slow("B(B(S)) B(B(S)) B(B(S))"), HEADER, 60)
    assert outs is None and not record
    assert "compile timed out after 1 s, twice" in problem and "hang" not in problem
    assert problem.startswith("did not compile")
    assert len(tries) == 2


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-5"])
def test_check_timeout_must_be_a_positive_finite_number(tmp_path, value):
    (tmp_path / "p.metal").write_text(PORT)
    ran = subprocess.run([*KPORT, "check", str(SAXPY), "--metal",
                          str(tmp_path / "p.metal"), f"--timeout={value}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.startswith("kport check: error: --timeout") and \
        len(ran.stderr.strip().splitlines()) == 1, ran.stderr
