"""The attack corpus (tests/sandbox/attacks), read for the sandbox tests (imported by name:
several test folders have a conftest.py, so helpers do not live in one).

attacks/metal: MLX metal_kernel bodies for corpus case 001_saxpy (NAME.metal, and
NAME.header.metal when the attack needs a header); attacks/cuda: CUDA kernels `k(float* y)`
for cuda_sim; attacks/cases: case folders whose code (Python reference, CUDA oracle, case.toml)
is the attack. Each file starts with `attack:` (what it tries) and, where the outcome is not
simply a refusal, `expect:`. Placeholders are listed in traces.py.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.sandbox.traces import Traces

HERE = Path(__file__).parent
ATTACKS = HERE / "attacks"
ROOT = HERE.parents[1]
SAXPY = ROOT / "corpus" / "cases" / "001_saxpy"



@dataclass(frozen=True)
class Attack:
    name: str
    what: str
    expect: str
    files: tuple[Path, ...]  # the attack's files (body then header, or the one .cu, or a folder)


def _meta(text: str, key: str) -> str:
    m = re.search(rf"^(?://|#) {key}: (.*)$", text, re.M)
    return m[1].strip() if m else ""


def metal_attacks() -> list[Attack]:
    out = []
    for body in sorted((ATTACKS / "metal").glob("*.metal")):
        if body.name.endswith(".header.metal"):
            continue
        header = body.with_name(body.stem + ".header.metal")
        text = body.read_text()
        out.append(Attack(body.stem, _meta(text, "attack"), _meta(text, "expect") or "refused",
                          (body, header) if header.is_file() else (body,)))
    return out


def cuda_attacks() -> list[Attack]:
    return [Attack(p.stem, _meta(p.read_text(), "attack"), _meta(p.read_text(), "expect"), (p,))
            for p in sorted((ATTACKS / "cuda").glob("*.cu"))]


def case_attacks() -> list[Attack]:
    out = []
    for folder in sorted(p for p in (ATTACKS / "cases").iterdir() if p.is_dir()):
        toml = (folder / "case.toml").read_text()
        out.append(Attack(folder.name, _meta(toml, "attack"), _meta(toml, "expect"), (folder,)))
    return out


def materialize(attack: Attack, traces: Traces, into: Path) -> list[Path]:
    """The attack's files with the placeholders filled in, under ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for src in attack.files:
        if src.is_dir():
            dst = into / src.name
            shutil.copytree(src, dst)
            for f in dst.rglob("*"):
                if f.is_file():
                    f.write_text(traces.fill(f.read_text()))
            # the same case.toml keys with the placeholder filled in (an absolute source path)
            out.append(dst)
        else:
            dst = into / src.name
            dst.write_text(traces.fill(src.read_text()))
            out.append(dst)
    return out
