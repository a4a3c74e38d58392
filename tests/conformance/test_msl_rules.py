"""metal_sim against the MSL that Apple's compiler accepts and rejects (issue 14).

Every `[[case]]` of tests/conformance/msl_rules/*.toml is compiled for real in metal_sim (see
msl_rules/README.md for the keys). An invalid snippet must be refused with a compile error at its
line of the user's source; a valid one must compile, and run right when it gives `expect`.
Entries with `enforced = false` run as strict xfails: the day metal_sim gets one right, the test
turns red until the flag is flipped (and docs/msl-rules.md with it).
"""

from __future__ import annotations

import functools
import platform
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from runners import mlx_metal
from runners.metal_sim import MetalLibrary, metal_kernel
from runners.simhost import build_only
from runners.srcrewrite import SourceError

RULES_DIR = Path(__file__).with_name("msl_rules")
DOC = Path(__file__).parents[2] / "docs" / "msl-rules.md"
_REQUIRED = ("id", "rule", "what", "valid", "form", "code", "confirmed", "msl", "source")
_INVALID_ONLY = ("line", "message", "message_confirmed")
_KNOWN = set(_REQUIRED + _INVALID_ONLY) | {
    "header", "in_header", "enforced", "today", "note", "inputs", "outputs", "grid",
    "threadgroup", "template", "atomic_outputs", "init_value", "expect", "kernel", "buffers"}
_DEFAULT_IN = ({"name": "inp", "dtype": "float32", "shape": [16]},)
_DEFAULT_OUT = ({"name": "out", "dtype": "float32", "shape": [16]},)


@dataclass(frozen=True)
class RuleCase:
    """One snippet of the corpus, with the defaults of msl_rules/README.md filled in."""

    id: str
    rule: str
    what: str
    valid: bool
    form: str
    code: str
    file: str  # the toml file it came from
    header: str = ""
    in_header: bool = False
    lines: tuple[int, ...] = ()
    message: str = ""
    message_confirmed: bool = False
    enforced: bool = True
    today: str = ""
    inputs: tuple = _DEFAULT_IN
    outputs: tuple = _DEFAULT_OUT
    grid: tuple = (16, 1, 1)
    threadgroup: tuple = (16, 1, 1)
    template: tuple = ()
    atomic_outputs: bool = False
    init_value: float | None = None
    expect: dict = field(default_factory=dict)
    kernel: str = "k"
    buffers: tuple = ()

    @property
    def error_file(self) -> str:
        """The file name metal_sim's diagnostics give the snippet's error line."""
        if self.form == "library":
            return "kernel.metal"
        return "header.metal" if self.in_header else "source.metal"


def _case(raw: dict, path: Path) -> RuleCase:
    where = f"{path.name}, case {raw.get('id', '?')!r}"
    missing = [k for k in _REQUIRED + (() if raw.get("valid") else _INVALID_ONLY) if k not in raw]
    unknown = set(raw) - _KNOWN
    if missing or unknown:
        raise ValueError(f"{where}: missing keys {missing}, unknown keys {sorted(unknown)} "
                         "(see msl_rules/README.md)")
    if raw["form"] not in ("body", "library"):
        raise ValueError(f"{where}: form must be 'body' or 'library'")
    if not raw.get("enforced", True) and not raw.get("today"):
        raise ValueError(f"{where}: enforced = false needs `today` (what metal_sim does now)")
    known = {f.name for f in fields(RuleCase)}
    values = {k: v for k, v in raw.items() if k in known}
    for key in ("inputs", "outputs", "grid", "threadgroup", "buffers"):
        if key in values:
            values[key] = tuple(values[key])
    values["template"] = tuple(tuple(t) for t in raw.get("template", ()))
    line = raw.get("line", [])
    values["lines"] = tuple(line) if isinstance(line, list) else (line,)
    return RuleCase(file=path.name, **values)


@functools.lru_cache(maxsize=1)
def load_cases() -> tuple[RuleCase, ...]:
    """Every case of msl_rules/*.toml, in file order."""
    cases = []
    for path in sorted(RULES_DIR.glob("*.toml")):
        cases += [_case(raw, path) for raw in tomllib.loads(path.read_text())["case"]]
    return tuple(cases)


@dataclass(frozen=True)
class Outcome:
    """What metal_sim made of one snippet."""

    compiled: bool
    diagnostics: tuple = ()  # simbuild.Diagnostic
    source_error: str = ""  # a SourceError raised instead of a record
    findings: tuple = ()
    outputs: dict = field(default_factory=dict)  # name or buffer index -> numpy array


def _array(spec: dict) -> np.ndarray:
    dtype = np.dtype(spec["dtype"])
    if "values" in spec:
        return np.asarray(spec["values"], dtype)
    shape = tuple(spec["shape"])
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


def _body_outcome(case: RuleCase, factory=metal_kernel) -> Outcome:
    """Build (run, with `expect`) a body case with metal_sim's or mlx_metal's metal_kernel."""
    kernel = factory(name="rule", input_names=[s["name"] for s in case.inputs],
                     output_names=[s["name"] for s in case.outputs], source=case.code,
                     header=case.header, atomic_outputs=case.atomic_outputs)
    run_args = dict(
        inputs=[mx.array(_array(s)) for s in case.inputs],
        output_shapes=[tuple(s["shape"]) for s in case.outputs],
        output_dtypes=[getattr(mx, s["dtype"]) for s in case.outputs], grid=case.grid,
        threadgroup=case.threadgroup, template=[(n, v) for n, v in case.template] or None,
        init_value=case.init_value)
    if case.expect or factory is not metal_kernel:
        run = kernel.launch(**run_args)
    else:
        with build_only():
            run = kernel.launch(**run_args)
    names = [s["name"] for s in case.outputs]  # run.outputs is empty when only built
    outputs = {n: np.array(o.astype(mx.float32)) for n, o in zip(names, run.outputs,
                                                                 strict=False)}
    return Outcome(run.compiled, tuple(run.diagnostics), findings=tuple(run.findings),
                   outputs=outputs)


def _parameter_dtype(type_text: str) -> np.dtype:
    words = set(re.findall(r"\w+", type_text))
    for word, dtype in (("half", np.float16), ("uint", np.uint32), ("int", np.int32)):
        if word in words:
            return np.dtype(dtype)
    return np.dtype(np.float32)


def _library_outcome(case: RuleCase) -> Outcome:
    function = MetalLibrary(case.code).function(case.kernel)
    if case.buffers:
        buffers = {b["index"]: _array(b) for b in case.buffers}
    else:  # made from the parameters: 16 elements each, a 0-d array for references
        buffers = {p.buffer_index: (np.ones((), _parameter_dtype(p.type)) if p.type.endswith("&")
                                    else np.zeros(16, _parameter_dtype(p.type)))
                   for p in function.params if p.buffer_index is not None}
    launch = functools.partial(function.launch, buffers, grid=case.grid,
                               threadgroup=case.threadgroup)
    if case.expect:
        run = launch()
    else:
        with build_only():
            run = launch()
    outputs = {str(i): np.asarray(b, np.float32) for i, b in buffers.items()}
    return Outcome(run.compiled, tuple(run.diagnostics), findings=tuple(run.findings),
                   outputs=outputs)


_OUTCOMES: dict[str, Outcome] = {}  # by case id, for the session


def outcome(case: RuleCase) -> Outcome:
    """Compile (and, with `expect`, run) one case, once a session."""
    if case.id not in _OUTCOMES:
        try:
            _OUTCOMES[case.id] = (_body_outcome(case) if case.form == "body"
                                  else _library_outcome(case))
        except SourceError as err:  # an exception where a compile-error record belongs
            _OUTCOMES[case.id] = Outcome(False, source_error=str(err))
    return _OUTCOMES[case.id]


def located_errors(case: RuleCase, result: Outcome) -> list:
    """The error diagnostics at the case's file and line(s)."""
    return [d for d in result.diagnostics if d.severity == "error"
            and d.file == case.error_file and d.line in case.lines]


def verdict(case: RuleCase, result: Outcome) -> str:
    """'' when metal_sim handles the case as Apple's compiler would, else what went wrong."""
    shown = "\n".join(str(d) for d in result.diagnostics) or result.source_error
    if not case.valid:
        if result.source_error:
            return f"raised SourceError instead of a compile-error record: {result.source_error}"
        if result.compiled:
            return "compiled (Apple's compiler rejects it)"
        if not located_errors(case, result):
            return (f"rejected, but with no error at {case.error_file}:{list(case.lines)}:\n"
                    f"{shown}")
        return ""
    if result.source_error or not result.compiled:
        return f"refused valid MSL:\n{shown}"
    if result.findings:
        return f"faulted: {[str(f) for f in result.findings]}"
    for name, want in case.expect.items():
        got, want = result.outputs.get(name), np.asarray(want, np.float32).reshape(-1)
        if got is None or got.size != want.size or not np.allclose(got.reshape(-1), want):
            return f"output {name}: got {None if got is None else got.reshape(-1).tolist()}, " \
                   f"want {want.tolist()}"
    return ""


def _param(case: RuleCase):
    marks = ()
    if not case.enforced:
        why = ("not enforced yet" if not case.valid else "metal_sim rejects valid MSL (a bug)")
        marks = pytest.mark.xfail(strict=True, reason=f"{why}: {case.today}")
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in load_cases()])
def test_metal_sim_agrees_with_apple(case):
    problem = verdict(case, outcome(case))
    assert not problem, f"{case.file} {case.id} ({case.rule}): {problem}"


def test_the_corpus_is_large_unique_and_sourced():
    cases = load_cases()
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert sum(not c.valid for c in cases) >= 70
    assert sum(c.valid for c in cases) >= 25
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", i) for i in ids)
    assert all(c.lines and all(isinstance(n, int) and n >= 1 for n in c.lines)
               for c in cases if not c.valid)
    for c in cases:  # the error line exists in the text it points into
        text = c.header if c.in_header else c.code
        assert c.valid or max(c.lines) <= len(text.splitlines()), c.id


def test_the_doc_table_lists_every_case_as_the_data_says():
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [x.strip() for x in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) >= 7 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    fix = "update docs/msl-rules.md (one table row per case; the last column is enforced)"
    assert set(rows) == {c.id for c in load_cases()}, fix
    for c in load_cases():
        assert rows[c.id][-1] == ("yes" if c.enforced else "no"), f"{c.id}: {fix}"


# ---- the same corpus against Apple's compiler, on a Mac ----------------------------------------

_MSL_BY_MACOS = {14: "3.1", 15: "3.2", 26: "4.0"}  # MLX's get_metal_version; 27+ is 4.1


def msl_here() -> str:
    """The MSL version MLX compiles with on this Mac (mlx/backend/metal/device.cpp)."""
    major = int((platform.mac_ver()[0] or "0").split(".")[0])
    return _MSL_BY_MACOS.get(major, "4.1" if major >= 27 else "3.1")


def holds_in(msl: str, version: str) -> bool:
    """Whether a case's `msl` range ("3.1+" or "3.1-4.0") covers ``version``."""
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))
    low, _, high = msl.rstrip("+").partition("-")
    return key(low) <= key(version) and (not high or key(version) <= key(high))


@pytest.mark.apple_gpu
@pytest.mark.skipif(not mlx_metal.available(), reason="needs Apple Silicon with Metal")
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in load_cases()
                                  if c.form == "body"])
def test_apple_compiler_agrees_with_the_corpus(case):
    """On a Mac, the corpus itself is checked: a wrong verdict here means a wrong entry."""
    if not holds_in(case.msl, msl_here()):
        pytest.skip(f"{case.id} holds for MSL {case.msl}; MLX uses {msl_here()} here")
    run = _body_outcome(case, mlx_metal.metal_kernel)
    text = "\n".join(d.message for d in run.diagnostics)
    if not case.valid:
        assert not run.compiled, f"{case.file} {case.id}: Apple's compiler accepts it"
        assert not case.message_confirmed or case.message in text, (case.id, text)
        return
    assert run.compiled, f"{case.file} {case.id}: Apple's compiler rejects it:\n{text}"
    for name, want in case.expect.items():
        np.testing.assert_allclose(run.outputs[name].reshape(-1), np.asarray(want, np.float32))


def test_the_msl_version_ranges_read_right():
    assert holds_in("3.1+", "4.1") and holds_in("3.1-4.0", "4.0")
    assert not holds_in("3.1-4.0", "4.1") and not holds_in("3.1-3.2", "4.0")
