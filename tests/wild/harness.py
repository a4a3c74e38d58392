"""The wild set's machinery (issue 15): real kernels ported from their original files in their
original trees with only the flags a user would type, then checked through the package a user
gets, at the sizes given to kport and at held-out sizes kport never saw, against numpy written
from each kernel's documented semantics (tests/wild/catalog.py).

A kernel counts as correct only when `kport port` says ACCEPTED *and* the package's ``run()``
agrees with numpy at every size set. ``run()`` is called as a user would call it: with the
kernel's own arguments by their CUDA names and the host function's sizes, of which it takes
the ones it asks for (it refuses unknown names); input arrays are flat, as the kernel sees
them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.cli import kport, load_package
from tests.conformance import expert_sources

# Pinned source distributions: (package, version, archive prefix to extract, pip extras)
PROJECTS = {
    "llama.cpp": (expert_sources.LLAMA_CPP, "vendor/llama.cpp/ggml/", ()),
    "torch-cluster": (("torch-cluster", "1.6.3"), "csrc/", expert_sources.SDIST_ONLY),
    "torch-scatter": (("torch-scatter", "2.1.2"), "csrc/", expert_sources.SDIST_ONLY),
    "causal-conv1d": (("causal-conv1d", "1.7.0"), "csrc/", expert_sources.SDIST_ONLY),
    "mamba-ssm": (("mamba-ssm", "2.3.2.post1"), "csrc/", expert_sources.SDIST_ONLY),
    "vllm": (("vllm", "0.6.3"), "csrc/", expert_sources.SDIST_ONLY),
    "deepspeed": (("deepspeed", "0.15.4"), "csrc/", expert_sources.SDIST_ONLY),
}
CASES = Path(__file__).with_name("cases")  # hand-written case.toml files, by kernel id


@dataclass(frozen=True)
class Wild:
    """One real kernel: where it is, what a user types, and how to check it."""

    id: str
    project: str  # a key of PROJECTS
    file: str  # path inside the extracted prefix, e.g. "vendor/llama.cpp/ggml/src/ggml-cuda/x.cu"
    kernel: str  # --kernel as a user types it
    sizes: dict[str, int]  # --size flags
    held_out: tuple[dict[str, int], ...]  # sizes kport never sees
    inputs: Callable[[dict, np.random.Generator], dict]  # run()'s arguments at a size set
    reference: Callable[[dict, dict], dict]  # expected outputs by CUDA name
    include: tuple[str, ...] = ()  # -I folders, relative to the extracted prefix's root
    extra: tuple[str, ...] = ()  # further flags a user types (--shared-mem ...)
    case: bool = False  # ported with tests/wild/cases/<id>/case.toml (written by hand)
    rtol: float = 1e-5
    atol: float = 1e-5
    note: str = ""


@dataclass
class Outcome:
    """What happened to one kernel: kport's verdict and the held-out check."""

    id: str
    verdict: str = "-"
    checks: list[str] = field(default_factory=list)  # "given: ok", "held-out 1: ..."
    why: str = ""

    @property
    def correct(self) -> bool:
        return self.verdict == "ACCEPTED" and bool(self.checks) and all(
            c.endswith(": ok") for c in self.checks)


def root_of(project: str) -> Path:
    """The extracted prefix of ``project``'s pinned sdist (downloaded once, cached); raises
    expert_sources.SourcesUnavailable."""
    package, prefix, extra = PROJECTS[project]
    return expert_sources.fetch(package, prefix, extra)


def command(w: Wild, root: Path, out: Path) -> list[str]:
    """The `kport port` arguments for ``w``: what a user would type."""
    args = ["port", str(root / w.file), "--kernel", w.kernel, "--offline", "--no-kb",
            "--out", str(out)]
    for inc in w.include:
        args += ["-I", str(root / inc)]
    if w.case:
        args += ["--case", str(CASES / w.id)]
    else:
        for k, v in w.sizes.items():
            args += ["--size", f"{k}={v}"]
    return args + list(w.extra)


def port_and_check(w: Wild, work: Path) -> Outcome:
    """Port ``w`` with `kport port` into ``work``/pkg and check the package at the given and
    the held-out sizes."""
    out = Outcome(w.id)
    root = root_of(w.project)
    pkg = work / "pkg"
    proc = kport(*command(w, root, pkg))
    m = re.search(r"kport port: (ACCEPTED|NOT ACCEPTED|error)", proc.stdout + proc.stderr)
    out.verdict = m[1] if m else f"exit {proc.returncode}"
    if out.verdict != "ACCEPTED":
        out.why = _first_reason(proc.stdout + proc.stderr, pkg)
        return out
    module = load_package(pkg, f"wild_{w.id}")
    for label, sizes in [("given", w.sizes), *[(f"held-out {i + 1}", s)
                                               for i, s in enumerate(w.held_out)]]:
        out.checks.append(f"{label}: {check_package(module, w, sizes)}")
    return out


def check_package(module, w: Wild, sizes: dict[str, int], seed: int = 0) -> str:
    """``ok`` or why the package's run() disagrees with numpy at ``sizes``."""
    rng = np.random.default_rng(seed)
    given = w.inputs(dict(sizes), rng)
    want = w.reference({k: (v.copy() if isinstance(v, np.ndarray) else v)
                        for k, v in given.items()}, dict(sizes))
    spec = module.SPEC
    # a user passes the arrays, the scalars the port does not derive, and the sizes run() asks
    # for (by the names it asks them: `size_nb0` when a kernel argument is also named nb0)
    derived = {n for n, a in spec["args"].items() if a["role"] == "scalar"
               and isinstance(a.get("value"), str) and a["value"] not in spec["sizes"]
               and not a["value"].lstrip("-").isdigit()}
    kwargs = {k: v for k, v in given.items()
              if k in set(spec["inputs"]) - derived or k in spec["size_args"].values()}
    kwargs |= {kw: sizes[sym] for sym, kw in spec["size_args"].items() if sym in sizes}
    try:
        got = module.run(**kwargs)
    except (TypeError, ValueError, RuntimeError) as err:
        return f"run() refused: {err}"
    except Exception as err:  # noqa: BLE001 (a package that crashes fails this check; go on)
        return f"run() crashed: {type(err).__name__}: {err}"
    for name, expected in want.items():
        if name not in got:
            return f"run() returned no {name!r} (it returned {', '.join(got)})"
        actual = module.as_numpy(name, got[name]).reshape(-1)
        expected = np.asarray(expected).reshape(-1)
        if actual.size < expected.size:
            return f"{name}: {actual.size} elements, expected {expected.size}"
        actual = actual[:expected.size]
        if not np.allclose(actual.astype(np.float64), expected.astype(np.float64),
                           rtol=w.rtol, atol=w.atol, equal_nan=True):
            bad = ~np.isclose(actual.astype(np.float64), expected.astype(np.float64),
                              rtol=w.rtol, atol=w.atol, equal_nan=True)
            i = int(np.argmax(bad))
            return (f"{name}: {int(bad.sum())} of {expected.size} differ, first at {i}: "
                    f"{actual[i]} vs {expected[i]}")
    return "ok"


def _first_reason(text: str, pkg: Path) -> str:
    report = pkg / "report.json"
    if report.is_file():
        try:
            return str(json.loads(report.read_text()).get("stop_reason") or "")[:300]
        except ValueError:
            pass
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else "")[:300]


def table(outcomes: list[Outcome], catalog: dict[str, Wild]) -> str:
    """The markdown table docs/translate.md carries."""
    rows = ["| kernel | project | typed | kport | given sizes | held-out sizes |",
            "|---|---|---|---|---|---|"]
    for o in outcomes:
        w = catalog[o.id]
        typed = "case.toml" if w.case else " ".join(f"{k}={v}" for k, v in w.sizes.items())
        checks = {c.split(":", 1)[0]: c.split(":", 1)[1].strip() for c in o.checks}
        held = [v for k, v in checks.items() if k.startswith("held-out")]
        rows.append(f"| `{w.kernel}` ({Path(w.file).name}) | {w.project} | {typed or '-'} | "
                    f"{o.verdict} | {checks.get('given', o.why or '-')} | "
                    f"{'ok' if held and all(h == 'ok' for h in held) else '; '.join(held) or '-'}"
                    " |")
    correct = sum(o.correct for o in outcomes)
    no_case = sum(o.correct and not catalog[o.id].case for o in outcomes)
    rows.append("")
    rows.append(f"{correct}/{len(outcomes)} correct offline; {no_case} of them without a "
                "hand-written case.toml.")
    return "\n".join(rows)
