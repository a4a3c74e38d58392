"""The output package of a port (a contract; outside checks import it):

    DIR/kernel.py       run(**kwargs) -> dict[str, mx.array], and a function named after the kernel
    DIR/kernel.metal    header + body of the metal_kernel
    DIR/report.md|json  what was ported, how it was checked, what is guessed or left to do
    DIR/test_kernel.py  pytest: run() against the oracle outputs saved in DIR/oracle_*.npz
    DIR/case.guessed.toml  (no --case) the guessed case, with the CUDA source beside it
    DIR/.kport-package  what kport wrote here (agent/out_folder.py), so a rerun may replace it

The package is written into a fresh folder and put in place whole (agent/out_folder.py).
kernel.py is agent/kernel_template.py with its port-data block filled in, so it needs only numpy
and MLX on a Mac (and kport's metal_sim elsewhere).
"""

from __future__ import annotations

import ast
import hashlib
import json
import keyword
import pprint
import re
import shutil
from pathlib import Path

import numpy as np

from agent.case_guess import GUESSED, total_bytes
from agent.llm import redact
from agent.translate import Translation
from agent.translate.analyze import VECTOR_TYPE
from corpus.candidate import Candidate
from corpus.cases import evaluate
from corpus.check import make_inputs, run_cuda, run_reference
from runners import sizeexpr, structs

TEMPLATE = Path(__file__).with_name("kernel_template.py")
# What a package holds (the oracle files numbered), as /save in `kport chat` announces it.
LAYOUT = ("kernel.py", "kernel.metal", "test_kernel.py", "oracle.json", "oracle_*.npz",
          "report.md", "report.json", ".kport-package")
_DATA = re.compile(r"# --- kport: port data ---\n.*?# --- kport: end of port data ---\n", re.S)
_EVALUATOR = re.compile(r"# --- kport: size evaluator ---\n.*?"
                        r"# --- kport: end of size evaluator ---\n", re.S)


def _evaluator_text() -> str:
    """runners/sizeexpr.py and runners/structs.py as kernel.py carries them: their code
    without the module docstrings and the __future__ imports (kernel.py has its own)."""
    parts = []
    for module in (sizeexpr, structs):
        code = Path(module.__file__).read_text()
        code = code[code.index('"""', 3) + 3:].replace("from __future__ import annotations\n", "")
        parts.append(code.strip())
    return ("# --- kport: size evaluator (runners/sizeexpr.py and runners/structs.py, copied by "
            "kport) ---\n" + "\n\n\n".join(parts) + "\n# --- kport: end of size evaluator ---\n")
RESERVED = {"run", "kernel", "evaluate", "as_numpy", "np", "ast", "functools", "operator"}
ORACLE_BYTES = 8 << 20  # arrays of one saved size set
ORACLE_SETS = 3

TEST_KERNEL = '''"""Checks kernel.py's run() against the oracle outputs kport saved beside it."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("kport_port_{tag}", HERE / "kernel.py")
kernel = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kernel)
META = json.loads((HERE / "oracle.json").read_text())


@pytest.mark.parametrize("entry", META["sets"], ids=[e["file"] for e in META["sets"]])
def test_run_matches_the_oracle(entry):
    data = np.load(HERE / entry["file"])
    kwargs = {{k[4:]: data[k] for k in data.files if k.startswith("arg_")}}
    got = kernel.run(**kwargs, **entry["size_args"])
    for key in (k for k in data.files if k.startswith("want_")):
        name = key[5:]
        want = kernel.as_numpy(name, data[key])
        have = kernel.as_numpy(name, got[name]).reshape(want.shape)
        assert not (np.isnan(have) & ~np.isnan(want)).any(), f"{{name}}: NaN (unwritten?)"
        close = np.isclose(have, want, rtol=META["rtol"], atol=META["atol"], equal_nan=True)
        assert close.all(), f"{{name}}: {{int((~close).sum())}} of {{close.size}} differ"
'''


def _py_string(text: str) -> str:
    """A Python literal for kernel text: a raw triple-quoted block when that is exact."""
    if text and "'''" not in text and not text.endswith(("\\", "'")) and "\r" not in text:
        return "r'''" + text + "'''"
    return repr(text)


def python_name(kernel: str) -> str:
    """A Python identifier for the kernel's function (``softmax<256>`` -> ``softmax``)."""
    name = re.sub(r"\W", "_", kernel.split("<")[0]) or "port"
    return f"{name}_kernel" if keyword.iskeyword(name) or name in RESERVED else name


def _names(expr) -> set[str]:
    if not isinstance(expr, str):
        return set()
    try:
        return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set()


def _field_values(fields: list[dict]) -> list:
    """Every leaf value of a struct's fields (lists flattened)."""
    out = []
    for f in fields:
        value = f.get("value")
        out += _field_values(f["fields"]) if f.get("fields") else (
            value if isinstance(value, list) else [value])
    return out


def port_spec(case, candidate: Candidate) -> dict:
    """kernel.py's SPEC: arguments (CUDA order), sizes, which sizes run() must be given, the
    MLX call (the candidate's launch). Sizes shown by an input array's dimension or a scalar
    argument are inferred."""
    args = {a.name: {"role": a.role, "dtype": a.dtype, "shape": list(a.shape),
                     **({"value": a.value} if a.role == "scalar" else {}),
                     **({"fields": a.layout(), "ctype": a.ctype} if a.fields else {}),
                     **({"shape_guessed": True} if a.shape_guessed else {}),
                     **({"field": a.field} if a.field else {}),
                     **({"default": True} if a.default else {})}
            for a in case.args}
    used: set[str] = set()
    for a in case.args:
        for e in [*a.shape, a.value, *_field_values(a.layout() if a.fields else [])]:
            used |= _names(e)
    for e in [*candidate.grid, *candidate.threadgroup, *candidate.template.values()]:
        used |= _names(e)
    used &= set(case.sizes)
    shown = {e for a in case.args if a.role in ("in", "inout") for e in a.shape
             if isinstance(e, str) and e in case.sizes}
    shown |= {a.value for a in case.args if a.role == "scalar" and a.value in case.sizes}
    # a struct's field named by a size gives it, not a CUDA vector's: the host computes that
    # from the sizes (fast-division constants), and the caller gives the sizes
    shown |= {v for a in case.args if a.fields and not VECTOR_TYPE.fullmatch(a.ctype)
              for v in _field_values(a.layout()) if isinstance(v, str) and v in case.sizes}
    size_args = {s: s if s not in args else f"size_{s}" for s in sorted(used - shown)}
    by_name = {a.name for a in case.args}
    return {"params": [a.name for a in case.args], "args": args, "sizes": sorted(case.sizes),
            "size_args": size_args,
            "out_args": {o: o if o in by_name else o.removesuffix("_out")
                         for o in candidate.outputs},
            **candidate.launch().model_dump()}


def kernel_py(kernel: str, candidate: Candidate, spec: dict, title: str) -> str:
    """The text of kernel.py: the template with the candidate's body, header and ``spec``."""
    fn = python_name(kernel)
    order = [p for p in spec["params"] if spec["args"][p]["role"] != "out"
             and not spec["args"][p].get("field")]  # a struct's pointer field: in its dict
    data = (f"# --- kport: port data ---\nKERNEL = {fn!r}\n"
            f"BODY = {_py_string(candidate.body)}\n"
            f"HEADER = {_py_string(candidate.header)}\n"
            f"SPEC: dict = {pprint.pformat(spec, width=96, sort_dicts=False)}\n"
            "# --- kport: end of port data ---\n")
    text = _DATA.sub(lambda _: data, TEMPLATE.read_text(), count=1)
    text = _EVALUATOR.sub(lambda _: _evaluator_text(), text, count=1)
    returned = sorted({spec["args"][o].get("field") or o for o in spec["out_args"].values()})
    doc = (f'"""The Metal port of the CUDA kernel `{kernel}`, generated by kport.\n\n'
           f"{title}\n\n"
           f"    run({', '.join(order + list(spec['size_args'].values()))}) -> dict of "
           f"{', '.join(returned)}\n\n"
           "Uses mx.fast.metal_kernel on Apple Silicon and kport's metal_sim elsewhere.\n"
           '"""\n')
    text = doc + text[text.index('"""', 3) + 4:]
    return text + (f"\n\ndef {fn}(*args, **kwargs) -> dict:\n"
                   f'    """{fn}({", ".join(order)}): run() with arguments in CUDA order."""\n'
                   f"    names = {order!r}\n"
                   "    if len(args) > len(names):\n"
                   f"        raise TypeError(f'{fn}() takes {{len(names)}} positional "
                   "arguments')\n"
                   "    return run(**dict(zip(names, args, strict=False)), **kwargs)\n")


def oracle_sets(case) -> list[dict[str, int]]:
    """Up to ORACLE_SETS of the case's size sets whose arrays fit ORACLE_BYTES, smallest
    first (at least the smallest one)."""
    sets = sorted(case.size_sets(), key=lambda s: total_bytes(case, s))
    small = [s for s in sets if total_bytes(case, s) <= ORACLE_BYTES]
    return (small or sets[:1])[:ORACLE_SETS]


def write_oracle(folder: Path, case, spec: dict) -> tuple[list[dict], list[str]]:
    """Save oracle inputs and outputs (seed 0) as oracle_<i>.npz and oracle.json; returns
    (sets written, notes about sets skipped because the oracle failed)."""
    outs = {n for n, a in spec["args"].items() if a["role"] in ("out", "inout")}
    entries, notes = [], []
    for i, sizes in enumerate(oracle_sets(case)):
        inputs = make_inputs(case, sizes, 0)
        if case.check.reference == "cuda":
            want, record = run_cuda(case, sizes, inputs)
            if not record.ok:
                notes.append(f"sizes {sizes}: the CUDA oracle failed; no oracle saved")
                continue
        else:
            want = run_reference(case, sizes, inputs)
        arrays = {f"arg_{n}": np.asarray(v) for n, v in inputs.items()
                  if spec["args"][n]["role"] != "out"}
        arrays.update({f"want_{n}": np.asarray(v) for n, v in want.items() if n in outs})
        np.savez(folder / f"oracle_{i}.npz", **arrays)
        entries.append({"file": f"oracle_{i}.npz", "sizes": sizes,
                        "size_args": {kw: int(evaluate(s, sizes))
                                      for s, kw in spec["size_args"].items()}})
    meta = {"rtol": case.check.rtol, "atol": case.check.atol, "seed": 0, "sets": entries}
    (folder / "oracle.json").write_text(json.dumps(meta, indent=1) + "\n")
    return entries, notes


def metal_text(kernel: str, candidate: Candidate) -> str:
    """kernel.metal: Translation.metal_source() of the shipped candidate."""
    tr = Translation(kernel=kernel, body=candidate.body, header=candidate.header,
                     inputs=candidate.inputs, outputs=candidate.outputs, roles={}, dtypes={},
                     template=candidate.template, grid=candidate.grid,
                     threadgroup=candidate.threadgroup)
    return tr.metal_source()


def copy_guessed_case(case_dir: Path, folder: Path) -> list[str]:
    """Copy a guessed case folder into ``folder`` with its case.toml as case.guessed.toml
    (never case.toml: the user may have one of their own there); returns the paths copied."""
    out = []
    for f in sorted(case_dir.rglob("*")):
        rel = f.relative_to(case_dir)
        if f.is_file() and not f.is_symlink():
            dest = folder / (GUESSED if str(rel) == "case.toml" else rel)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest)
            out.append(str(dest.relative_to(folder)))
    return out


def write_package(folder: Path, *, case, kernel: str, candidate: Candidate,
                  guessed_case: Path | None = None) -> dict:
    """Write kernel.py, kernel.metal, test_kernel.py and the oracle into ``folder`` (a fresh
    one: agent/out_folder.write_folder puts it in place), plus case.guessed.toml and the CUDA
    source when the case was guessed (``guessed_case`` is its folder). Returns what was
    written."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = port_spec(case, candidate)
    # A model that echoed a secret into a comment must not leave it in the package.
    (folder / "kernel.py").write_text(redact(kernel_py(kernel, candidate, spec, case.title)))
    (folder / "kernel.metal").write_text(redact(metal_text(kernel, candidate)))
    digest = hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:8]
    tag = f"{python_name(kernel)}_{digest}"
    (folder / "test_kernel.py").write_text(TEST_KERNEL.format(tag=tag))
    entries, notes = write_oracle(folder, case, spec)
    files = ["kernel.py", "kernel.metal", "test_kernel.py", "oracle.json",
             *(e["file"] for e in entries)]
    if guessed_case is not None:
        files += copy_guessed_case(guessed_case, folder)
    return {"files": files + ["report.md", "report.json"], "oracle": entries,
            "oracle_notes": notes, "size_args": spec["size_args"],
            "function": python_name(kernel)}
