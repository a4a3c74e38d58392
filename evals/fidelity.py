"""Simulator fidelity: run the conformance cases and the corpus's CUDA kernels in cuda_sim and
on a real NVIDIA GPU, and compare.

    python -m evals.fidelity sim DIR      # here: inputs + cuda_sim outputs -> DIR/sim.npz
    python -m evals.fidelity gpu DIR      # on the GPU machine: same inputs -> DIR/gpu.npz
    python -m evals.fidelity table DIR    # the agreement table (markdown) for docs/fidelity.md

Inputs are generated once (conformance: seeds 1 and 2; corpus: seed 0 at the default sizes and
at the first variant) and carried to the GPU, so both sides see the same bytes. A disagreement
is a simulator bug until shown otherwise.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import runners
from corpus.cases import discover, evaluate
from corpus.check import make_inputs
from evals.conformance import CASES

SEEDS = (1, 2)
SIDES = {"sim": "cuda_sim", "gpu": "cuda_gpu"}  # side -> the runner that runs it


@dataclass
class Run:
    """One kernel launch to compare: what to compile, how to launch, fresh arguments."""

    name: str
    seed: int
    code: str
    kernel: str
    grid: tuple
    block: tuple
    shared_mem: int
    options: tuple
    args: list
    rtol: float
    atol: float


def runs() -> list[Run]:
    """The conformance cases, then every corpus case at its default and first variant sizes."""
    out = [Run(c.name, seed, c.code, c.kernel, c.grid, c.block, c.shared_mem, (),
               c.make(np.random.default_rng(seed)), c.rtol, c.atol)
           for c in CASES for seed in SEEDS]
    for case in discover():
        for label, sizes in zip(("default", "variant"), case.size_sets()[:2], strict=False):
            grid = tuple(int(evaluate(x, sizes)) for x in case.cuda.grid)
            block = tuple(int(evaluate(x, sizes)) for x in case.cuda.block)
            out.append(Run(f"{case.id}@{label}", 0, (case.folder / case.cuda.source).read_text(),
                           case.cuda.kernel, grid, block,
                           int(evaluate(case.cuda.shared_mem, sizes)), (f"-I{case.folder}",),
                           list(make_inputs(case, sizes, 0).values()), case.check.rtol,
                           case.check.atol))
    return out


def _key(run, index):
    return f"{run.name}/{run.seed}/{index}"


def run_side(folder: Path, side: str) -> None:
    """Run every launch on one side ("sim" or "gpu"), saving outputs and per-run notes."""
    runner = runners.get(SIDES[side])
    folder.mkdir(parents=True, exist_ok=True)
    inputs_file = folder / "inputs.npz"
    stored = dict(np.load(inputs_file)) if inputs_file.is_file() else {}
    outputs, notes = {}, {}
    for run in runs():
        args = run.args
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                args[i] = stored.setdefault(_key(run, i), a).copy()
        kernel = runner.kernel(run.code, run.kernel, options=run.options)
        record = kernel.launch(run.grid, run.block, args, shared_mem=run.shared_mem)
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                outputs[_key(run, i)] = a
        notes[f"{run.name}/{run.seed}"] = {
            "ok": bool(record.ok),
            "findings": [str(f) for f in record.findings],
            "error": record.error or "; ".join(str(d) for d in record.diagnostics[:2]),
        }
        print(f"{side} {run.name} seed {run.seed}: {'ok' if record.ok else 'NOT OK'}",
              flush=True)
    if side == "sim":
        np.savez(inputs_file, **stored)
    np.savez(folder / f"{side}.npz", **outputs)
    (folder / f"{side}.json").write_text(json.dumps(notes, indent=1))


def _compare(a: np.ndarray, b: np.ndarray) -> tuple[bool, float]:
    if a.dtype.kind == "f":
        same_nan = np.array_equal(np.isnan(a), np.isnan(b))
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        finite = np.isfinite(fa) & np.isfinite(fb)
        diff = float(np.max(np.abs(fa[finite] - fb[finite]), initial=0.0)) if same_nan else np.inf
        return bool(same_nan and np.array_equal(a.view(np.uint8), b.view(np.uint8))), diff
    return bool(np.array_equal(a, b)), float(np.max(np.abs(a.astype(np.int64) -
                                                            b.astype(np.int64)), initial=0))


def table(folder: Path) -> str:
    """Markdown agreement table of sim.npz against gpu.npz."""
    sim, gpu = np.load(folder / "sim.npz"), np.load(folder / "gpu.npz")
    sim_notes = json.loads((folder / "sim.json").read_text())
    gpu_notes = json.loads((folder / "gpu.json").read_text())
    rows = ["| kernel | seed | outputs bit-identical | max abs diff | within tolerance "
            "| simulator findings | GPU run |", "|---|---|---|---|---|---|---|"]
    agree = total = 0
    for run in runs():
        keys = [k for k in sim.files if k.startswith(f"{run.name}/{run.seed}/")]
        exact, worst, within = True, 0.0, True
        for k in keys:  # every array argument; untouched inputs agree trivially
            if k not in gpu.files:
                exact = within = False
                continue
            same, diff = _compare(sim[k], gpu[k])
            exact &= same
            worst = max(worst, diff)
            within &= bool(np.allclose(sim[k].astype(np.float64), gpu[k].astype(np.float64),
                                       rtol=run.rtol, atol=run.atol, equal_nan=True))
        note = sim_notes.get(f"{run.name}/{run.seed}", {"findings": [], "ok": False})
        g = gpu_notes.get(f"{run.name}/{run.seed}", {})
        gpu_ok = bool(g.get("ok"))
        within &= gpu_ok
        total += 1
        agree += within
        findings = "; ".join(note["findings"])[:160] or ("none" if note["ok"] else "not run")
        rows.append(f"| {run.name} | {run.seed} | {'yes' if exact and gpu_ok else 'no'} | "
                    f"{worst:.3g} | {'yes' if within else '**NO**'} | {findings} | "
                    f"{'ok' if gpu_ok else (g.get('error') or 'missing')[:120]} |")
    return f"{agree} of {total} runs agree within tolerance.\n\n" + "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("sim", "gpu", "table"):
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[1])
    if argv[0] == "table":
        print(table(folder))
    else:
        run_side(folder, argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
