"""Property-based tests (hypothesis) of the validation layer: whatever a case file or a command
line holds, kport answers with a result or one clear error (exit 2), never a traceback, a hang
or an allocation it cannot make."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent.cli import EXIT_BUG, main
from corpus.cases import CASE_MAX_BYTES, CaseError, evaluate, load_case
from corpus.check import make_inputs
from runners import limits

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "corpus" / "cases" / "001_saxpy"

# --- expressions -------------------------------------------------------------------------------
_atoms = st.one_of(st.integers(-2**70, 2**70), st.sampled_from(["n", "m", "0", "1", "2.5",
                                                                "1e308", "-0", "True"]),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))
_ops = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "<",
                        "==", " and ", " or "])


def _expr(children):
    return st.one_of(
        st.tuples(children, _ops, children).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
        st.tuples(st.sampled_from(["min", "max", "ceil_div", "abs", "pow"]),
                  st.lists(children, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        children.map(lambda c: f"-{c}"), children.map(lambda c: f"not {c}"))


EXPRESSIONS = st.recursive(_atoms.map(str), _expr, max_leaves=12) | st.text(max_size=40)


@settings(max_examples=400, deadline=3000, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_an_expression_is_a_finite_number_or_a_case_error(expr):
    start = time.perf_counter()
    try:
        value = evaluate(expr, {"n": 1000, "m": 7}, "args.x.shape")
    except CaseError as err:
        assert str(err).startswith("args.x.shape: ")
    else:
        assert isinstance(value, (int, float, bool))
        assert isinstance(value, bool) or abs(value) <= 2**64 and math.isfinite(value)
    assert time.perf_counter() - start < 3  # no blow-up (generous: CI runs two workers)


# --- case files --------------------------------------------------------------------------------
# The lines of 001_saxpy/case.toml a mutation may replace, and the key each one sets.
_LINES = ['n = 100000', 'rtol = 1e-6', 'atol = 1e-6', 'grid = ["ceil_div(n, 256)", 1, 1]',
          'block = [256, 1, 1]', 'threadgroup = [256, 1, 1]', 'value = "n"', 'n = 997',
          'grid = ["ceil_div(n, 256) * 256", 1, 1]', 'value = 2.5', 'init = "normal"']


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") \
            if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


_scalars = st.one_of(st.integers(-2**40, 2**40), st.sampled_from([0, 1, 2**31, 2**63 - 1]),
                     st.floats(), st.booleans(), EXPRESSIONS, st.sampled_from(
                         ["normal", "randint:0:9", "uniform:3:1", "zeros", "ones:1"]))
VALUES = st.one_of(_scalars, st.lists(_scalars, max_size=4))


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutations=st.lists(st.tuples(st.sampled_from(_LINES), VALUES), min_size=1, max_size=3))
def test_a_case_file_loads_within_its_limits_or_says_why(tmp_path, mutations):
    folder = tmp_path / "saxpy"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(SAXPY, folder)
    text = (folder / "case.toml").read_text().replace('id = "001_saxpy"', 'id = "saxpy"')
    for line, value in mutations:
        key = line.split(" = ")[0]
        text = text.replace(line, f"{key} = {_toml(value)}", 1)
    (folder / "case.toml").write_text(text)
    start = time.perf_counter()
    try:
        case = load_case(folder)
    except CaseError as err:
        assert str(err).startswith(str(folder / "case.toml")), err
        assert "\n" not in str(err)
        return
    finally:
        assert time.perf_counter() - start < 20  # no blow-up (generous: CI is loaded)
    # accepted: each size set's arrays fit, their launches are legal, and small ones are made
    for sizes in case.size_sets():
        nbytes = sum(math.prod(int(evaluate(d, sizes)) for d in a.shape) * 4
                     for a in case.args if a.role != "scalar")
        assert nbytes <= CASE_MAX_BYTES
        grid = [int(evaluate(d, sizes)) for d in case.cuda.grid]
        limits.check_cuda_launch(grid, [int(evaluate(d, sizes)) for d in case.cuda.block], "x")
        if nbytes < 1 << 20:
            inputs = make_inputs(case, sizes, seed=0)
            for arg in case.args:
                if arg.role != "scalar":
                    shape = tuple(int(evaluate(d, sizes)) for d in arg.shape)
                    assert inputs[arg.name].shape == shape


# --- command lines -----------------------------------------------------------------------------
_dims_text = st.sampled_from(["1", "2", "64"]) | st.one_of(
    st.lists(st.integers(-5, 2**33), min_size=1, max_size=4).map(lambda v: ",".join(map(str, v))),
    st.sampled_from(["1", "4", "256", "1025", "0", "", "a", "1,,1", "4,1,1", "1e3"]))
_arg_text = st.one_of(
    st.sampled_from(["x=zeros:float32:4", "y=zeros:float32:4", "a=float32:2", "n=int32:4",
                     "n=int32:99999999999", "x=zeros:float32:-1", "x=zeros:float32:9999999999",
                     "a=float32:nan", "a=float32:1e39", "x=zeros:bfloat16:4", "x=none.npy",
                     "x=zeros:float32:a", "=1", "x", "x=int8:300", "n=uint32:-1"]),
    st.text(max_size=20))


_GOOD = ["x=zeros:float32:64", "y=zeros:float32:64", "a=float32:2", "n=int32:64"]
# mostly the right four arguments with one of them swapped, so that many runs reach the kernel
_ARGS = st.one_of(st.lists(_arg_text, max_size=5),
                  st.tuples(st.integers(0, 4), _arg_text).map(
                      lambda t: _GOOD[:t[0]] + [t[1]] + _GOOD[t[0] + 1:]),
                  st.just(_GOOD))


@pytest.fixture(scope="module")
def saxpy_source(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("fuzz-cli")
    shutil.copy(SAXPY / "kernel.cu", folder / "kernel.cu")
    return str(folder / "kernel.cu")


@pytest.mark.slow  # a fuzzer over whole CLI runs (tests/tiers.py)
@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(grid=_dims_text, block=_dims_text, args=_ARGS,
       extra=st.sampled_from([[], ["--shared-mem", "-1"], ["--shared-mem", "999999"],
                              ["--json"], ["--kernel", "nosuch"], ["--bogus"]]))
def test_kport_sim_options_give_a_result_or_one_line(saxpy_source, capsys, grid, block, args,
                                                    extra):
    argv = ["sim", saxpy_source, "--kernel", "saxpy", "--grid", grid, "--block", block]
    for a in args:
        argv += ["--arg", a]
    code = main(argv + extra)
    out, err = capsys.readouterr()
    event(f"exit {code}")
    assert code in (0, 1, 2), (argv, code, err)
    assert code != EXIT_BUG and "Traceback" not in out + err, (argv, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, (argv, err)


_size_text = st.one_of(st.just("n=1000"),
                       st.sampled_from(["n=1024", "n=0", "n=-3", "n=lots", "n=", "=5", "n=1e3",
                                        "n=99999999999", "m=4", "n=4=4", "n=3000000000"]),
                       st.text(max_size=12))
_budget_text = st.sampled_from(["nan", "inf", "-1", "0", "0.5", "abc", "30"])


@pytest.mark.slow  # a fuzzer over whole CLI runs (tests/tiers.py)
@settings(max_examples=15, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(_size_text, max_size=2), grid=st.none() | _dims_text,
       block=st.none() | _dims_text, wall=st.just("60") | _budget_text,
       seeds=st.just("1") | st.sampled_from(["0", "11", "x"]))
def test_kport_port_options_give_a_result_or_one_line(saxpy_source, tmp_path_factory, capsys,
                                                     sizes, grid, block, wall, seeds):
    out = tmp_path_factory.mktemp("port-out") / "pkg"
    argv = ["port", saxpy_source, "--kernel", "saxpy", "--offline", "--no-kb", "--out",
            str(out), "--wall", wall, "--seeds", seeds]
    for s in sizes:
        argv += ["--size", s]
    argv += ["--grid", grid] if grid is not None else []
    argv += ["--block", block] if block is not None else []
    code = main(argv)
    out_text, err = capsys.readouterr()
    event(f"exit {code}")
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in out_text + err, (argv, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, (argv, err)
