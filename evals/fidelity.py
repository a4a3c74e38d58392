"""Simulator fidelity: run the conformance cases in cuda_sim and on a real NVIDIA GPU, compare.

    python -m evals.fidelity sim DIR      # here: inputs + cuda_sim outputs -> DIR/sim.npz
    python -m evals.fidelity gpu DIR      # on the GPU machine: same inputs -> DIR/gpu.npz
    python -m evals.fidelity table DIR    # the agreement table (markdown) for docs/fidelity.md

Inputs are generated once (seeds 1 and 2) and carried to the GPU, so both sides see the same
bytes. A disagreement is a simulator bug until shown otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from evals.conformance import CASES, run_case

SEEDS = (1, 2)


def _key(case, seed, index):
    return f"{case.name}/{seed}/{index}"


def run_side(folder: Path, side: str) -> None:
    """Run every case on one side ("sim" or "gpu"), saving outputs and per-case notes."""
    if side == "sim":
        from runners.cuda_sim import RawKernel
    else:
        from runners.cuda_gpu import RawKernel
    folder.mkdir(parents=True, exist_ok=True)
    inputs_file = folder / "inputs.npz"
    stored = dict(np.load(inputs_file)) if inputs_file.is_file() else {}
    outputs, notes = {}, {}
    for case in CASES:
        for seed in SEEDS:
            args = case.make(np.random.default_rng(seed))
            for i, a in enumerate(args):
                key = _key(case, seed, i)
                if key in stored and isinstance(a, np.ndarray):
                    args[i] = stored[key].copy()
                elif isinstance(a, np.ndarray):
                    stored[key] = a.copy()
            inputs, after, record = run_case(case, RawKernel, args=args)
            for i, a in enumerate(after):
                if isinstance(a, np.ndarray):
                    outputs[_key(case, seed, i)] = a
            notes[f"{case.name}/{seed}"] = {
                "ok": bool(record.ok),
                "findings": [str(f) for f in getattr(record, "findings", [])],
                "error": getattr(record, "error", ""),
            }
            print(f"{side} {case.name} seed {seed}: {'ok' if record.ok else 'NOT OK'}",
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
    rows = ["| case | seed | outputs bit-identical | max abs diff | within case tolerance "
            "| simulator findings | GPU run |", "|---|---|---|---|---|---|---|"]
    agree = total = 0
    for case in CASES:
        for seed in SEEDS:
            keys = [k for k in sim.files if k.startswith(f"{case.name}/{seed}/")]
            exact, worst, within = True, 0.0, True
            for i in (int(k.rsplit("/", 1)[1]) for k in keys):  # every array argument
                k = _key(case, seed, i)
                if k not in gpu.files:
                    exact, within = False, False
                    continue
                same, diff = _compare(sim[k], gpu[k])
                exact &= same
                worst = max(worst, diff)
                within &= bool(np.allclose(sim[k].astype(np.float64), gpu[k].astype(np.float64),
                                           rtol=case.rtol, atol=case.atol, equal_nan=True))
            note = sim_notes[f"{case.name}/{seed}"]
            g = gpu_notes.get(f"{case.name}/{seed}", {})
            total += 1
            agree += within
            findings = "; ".join(note["findings"])[:160] or "none"
            rows.append(f"| {case.name} | {seed} | {'yes' if exact else 'no'} | {worst:.3g} | "
                        f"{'yes' if within else '**NO**'} | {findings} | "
                        f"{'ok' if g.get('ok') else g.get('error', 'missing')} |")
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
