"""Validate the cost model (runners/perf_model.py) against real GPU times.

    python -m evals.perf_validate count     # cuda_sim counters of every variant -> evals/data
    python -m evals.perf_validate report    # predictions vs evals/data/perf_h200_times.json
    python -m evals.perf_validate heldout-predict  # count + predict the held-out set, untimed
    python -m evals.perf_validate heldout-report   # those saved predictions vs their times

``count`` runs each variant of evals/perf_cases.py in cuda_sim on a prefix of its grid
(``count_groups`` blocks) and scales the counters to the whole grid (the kernels are
grid-uniform). ``report`` predicts each variant with the H200's parameters and prints the
Spearman rank correlation over all variants and per family, and the median ratio
predicted / measured (the table in docs/perf-model.md).

The held-out set (``HELDOUT_VARIANTS``, families ``heldout_*``) is kept apart: it is never in
``count``/``report`` (which the model was shaped with). ``heldout-predict`` counts it into
``perf_heldout_counters.json`` and writes the model's predictions, with the git commit and
date, to ``perf_heldout_predictions.json``; it refuses once held-out times exist, so the
predictions cannot be redone after the measurement. ``heldout-report`` compares the saved
predictions, as written, with ``perf_heldout_h200_times.json`` (``python -m evals.perf_time
OUT.json --heldout``).
"""

from __future__ import annotations

import datetime
import json
import statistics
import subprocess
import sys

import runners
from evals.perf_cases import HELDOUT_VARIANTS, ROOT, VARIANTS, PerfVariant, make_args
from kb.perf_chips import perf_chip
from runners.perf_model import Launch, arithmetic_estimate, predict, scale_counters

DATA = ROOT / "evals" / "data"
COUNTERS = DATA / "perf_counters.json"
TIMES = DATA / "perf_h200_times.json"
HELDOUT_COUNTERS = DATA / "perf_heldout_counters.json"
HELDOUT_PREDICTIONS = DATA / "perf_heldout_predictions.json"
HELDOUT_TIMES = DATA / "perf_heldout_h200_times.json"


def count_variant(v: PerfVariant) -> dict:
    """Counters of ``v`` over its whole grid (a prefix counted, then scaled)."""
    code = (ROOT / v.file).read_text()
    args = make_args(v)
    groups = min(v.count_groups, v.groups)
    grid = (min(groups, v.grid[0]), max(1, groups // v.grid[0]), 1) if groups < v.groups \
        else v.grid
    kernel = runners.get("cuda_sim").kernel(code, v.kernel, filename=v.file)
    run = kernel.launch(grid, v.block, args, count=True)
    if not run.compiled or run.findings:
        raise RuntimeError(f"{v.name}: {run.diagnostics or run.findings}")
    buffer_bytes = sum(a.nbytes for a in args if hasattr(a, "nbytes") and a.ndim)
    return scale_counters(run.counters, v.groups, buffer_bytes)


def ranks(xs: list[float]) -> list[float]:
    """Average ranks (ties share their mean rank)."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of two equally long lists."""
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    var = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return cov / var if var else 0.0


def predictions(counters: dict, chip_name: str = "H200",
                variants: list[PerfVariant] | None = None) -> dict[str, dict]:
    """name -> prediction (as_dict) of every variant (of VARIANTS by default) with counters."""
    chip = perf_chip(chip_name)
    out = {}
    for v in VARIANTS if variants is None else variants:
        if v.name not in counters:
            continue
        code = (ROOT / v.file).read_text()
        launch = Launch(groups=v.groups, threads_per_group=v.block[0] * v.block[1] * v.block[2])
        out[v.name] = predict(counters[v.name], launch, chip,
                              arithmetic_estimate(code, v.kernel)).as_dict()
    return out


def report(counters: dict, times: dict, pred: dict | None = None,
           variants: list[PerfVariant] | None = None) -> dict:
    """Spearman over all and per family, median predicted/measured, and the rows. ``pred``:
    predictions already made (else made now from ``counters``); ``variants``: VARIANTS by
    default."""
    variants = VARIANTS if variants is None else variants
    pred = predictions(counters, variants=variants) if pred is None else pred
    measured = {r["name"]: r for r in times["results"] if "median_s" in r}
    rows = [(v.family, v.name, pred[v.name]["predicted_s"], measured[v.name]["median_s"],
             pred[v.name]["bottleneck"]) for v in variants if v.name in pred and v.name in
            measured]
    families = {}
    for fam in dict.fromkeys(r[0] for r in rows):
        sub = [r for r in rows if r[0] == fam]
        families[fam] = {"n": len(sub), "spearman": spearman([r[2] for r in sub],
                                                            [r[3] for r in sub])}
    return {"n": len(rows), "spearman": spearman([r[2] for r in rows], [r[3] for r in rows]),
            "median_ratio": statistics.median(r[2] / r[3] for r in rows),
            "families": families,
            "rows": [{"family": f, "name": n, "predicted_s": p, "measured_s": m, "bottleneck": b}
                     for f, n, p, m, b in rows]}


MODEL_FILES = ["runners/perf_model.py", "kb/rules/arch/perf_chips.toml"]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


def _count_into(path, variants: list[PerfVariant], only: set[str] = frozenset()) -> dict:
    """Counters of ``variants`` (those named in ``only`` when given, recounted; else those
    ``path`` lacks), saved to ``path`` after each one, so a stopped run resumes."""
    found = json.loads(path.read_text()) if path.is_file() else {}
    for v in variants:
        if (only and v.name not in only) or (not only and v.name in found):
            continue
        found[v.name] = count_variant(v)
        print(v.name, found[v.name].get("global_load_sectors"), flush=True)
        path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    return found


def heldout_predict() -> dict:
    """Count every held-out variant (resuming perf_heldout_counters.json) and write the
    model's predictions with the commit and date. Refuses once held-out times exist."""
    if HELDOUT_TIMES.is_file():
        raise SystemExit(f"{HELDOUT_TIMES.name} exists: held-out predictions are made before "
                         "the times, not after")
    found = _count_into(HELDOUT_COUNTERS, HELDOUT_VARIANTS)
    pred = predictions(found, variants=HELDOUT_VARIANTS)
    out = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           "chip": "H200", "head": _git("rev-parse", "HEAD"),
           "model_commit": _git("log", "-1", "--format=%H", "--", *MODEL_FILES),
           "model_uncommitted_changes": bool(_git("status", "--porcelain", "--",
                                                  *MODEL_FILES)),
           "model_files": MODEL_FILES,
           "predictions": {v.name: {"family": v.family, "predicted_s": pred[v.name]["predicted_s"],
                                    "bottleneck": pred[v.name]["bottleneck"],
                                    "terms_s": pred[v.name]["terms_s"]}
                           for v in HELDOUT_VARIANTS}}
    HELDOUT_PREDICTIONS.write_text(json.dumps(out, indent=1) + "\n")
    return out


def _print_report(r: dict) -> None:
    print("| family | variant | predicted µs | measured µs | ratio | bottleneck |")
    print("|---|---|---:|---:|---:|---|")
    for row in r["rows"]:
        print(f"| {row['family']} | {row['name']} | {row['predicted_s'] * 1e6:.1f} | "
              f"{row['measured_s'] * 1e6:.1f} | {row['predicted_s'] / row['measured_s']:.2f}"
              f" | {row['bottleneck']} |")
    print(f"\nall {r['n']}: Spearman {r['spearman']:.3f}, median predicted/measured "
          f"{r['median_ratio']:.2f}")
    for fam, f in r["families"].items():
        if f["n"] < 2:
            print(f"{fam} ({f['n']}): one variant, no rank to correlate")
        elif f["n"] == 2:
            print(f"{fam} (2): Spearman {f['spearman']:.3f} (a pair: ordered "
                  f"{'right' if f['spearman'] > 0 else 'wrong'})")
        else:
            print(f"{fam} ({f['n']}): Spearman {f['spearman']:.3f}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["heldout-predict"]:
        out = heldout_predict()
        for name, p in out["predictions"].items():
            print(f"{p['family']:18s} {name:22s} {p['predicted_s'] * 1e6:10.1f} us "
                  f"{p['bottleneck']}")
        return 0
    if argv[:1] == ["heldout-report"]:
        saved = json.loads(HELDOUT_PREDICTIONS.read_text())["predictions"]
        _print_report(report({}, json.loads(HELDOUT_TIMES.read_text()), pred=saved,
                             variants=HELDOUT_VARIANTS))
        return 0
    if argv[:1] == ["count"]:
        _count_into(COUNTERS, VARIANTS, set(argv[1:]))
        return 0
    if argv[:1] == ["report"]:
        _print_report(report(json.loads(COUNTERS.read_text()), json.loads(TIMES.read_text())))
        return 0
    print("usage: python -m evals.perf_validate count [NAME...] | report | heldout-predict | "
          "heldout-report", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
