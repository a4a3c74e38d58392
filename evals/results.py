"""A run folder of ``kport eval``: ``results.jsonl`` (one JSON line per finished case, appended
and fsync'd as each finishes) and ``run.json`` (settings, start time, versions, metrics), and
the metrics both ``kport eval`` and ``kport report`` print.

A kill loses nothing finished: a line is on disk before the next case is counted. A half-written
last line (no newline, or not JSON) is what a kill mid-write leaves; resuming cuts it off and
redoes that case. A bad line anywhere else is a damaged file, named with its line number.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from evals.eval_case import RESULT_FIELDS
from runners.errors import KportError

RESULTS, RUN = "results.jsonl", "run.json"


class RunDirError(KportError):
    """A run folder, its results.jsonl or its run.json is missing or malformed; the message
    names the file (and line) and what to do."""


def read_results(folder: Path) -> tuple[list[dict], int | None]:
    """(records, line number of a half-written last line or None) of ``folder/results.jsonl``;
    no file reads as no records. Raises RunDirError for a complete line that is not JSON or
    lacks a result field (damage, not a kill: a line is written whole, newline last)."""
    path = Path(folder) / RESULTS
    if not path.is_file():
        return [], None
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    # the text after the last newline is a line whose write a kill cut short (or nothing)
    partial = len(lines) if lines[-1].strip() else None
    records = []
    for number, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise RunDirError(f"{path} line {number}: not JSON ({err.msg}); delete or fix that "
                              "line (a resumed run then redoes its case)") from None
        missing = [k for k in RESULT_FIELDS if not isinstance(rec, dict) or k not in rec]
        if missing:
            raise RunDirError(f"{path} line {number}: no key {missing[0]!r}; not a kport eval "
                              "result line (delete it, or rerun the case)")
        records.append(rec)
    return records, partial


def cut_partial_tail(folder: Path) -> None:
    """Cut ``results.jsonl`` back to its last complete line (what a kill mid-write leaves)."""
    path = Path(folder) / RESULTS
    if not path.is_file():
        return
    keep = path.read_bytes().rfind(b"\n") + 1
    with open(path, "r+b") as f:
        f.truncate(keep)
        os.fsync(f.fileno())


def append_result(folder: Path, record: dict) -> None:
    """Append one record as a JSON line and fsync it, so that a kill right after loses nothing."""
    with open(Path(folder) / RESULTS, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_run(folder: Path) -> dict:
    """``folder/run.json``; RunDirError when the folder, the file or its JSON is missing."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RunDirError(f"{folder}: no such folder; give the --out folder of a `kport eval`")
    path = folder / RUN
    if not path.is_file():
        raise RunDirError(f"{path}: missing; {folder} is not a `kport eval` run folder")
    try:
        run = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        line = getattr(err, "lineno", 1)
        raise RunDirError(f"{path} line {line}: not JSON ({err}); rerun `kport eval` into a "
                          "new --out folder") from None
    if not isinstance(run, dict) or "settings" not in run:
        raise RunDirError(f"{path}: no key 'settings'; not written by `kport eval`")
    return run


def write_run(folder: Path, run: dict) -> None:
    """Write run.json atomically (a kill leaves the old or the new file, never half of one)."""
    path = Path(folder) / RUN
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(run, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def metrics(records: list[dict], p: float = 1.0) -> dict:
    """Compiled and correct fractions, fast_p (correct and more than ``p`` times faster than
    the baseline, over all cases; None when no correct case has a timing: off Apple Silicon),
    mean iterations, mean wall seconds per case and total LLM tokens."""
    n = len(records)
    timed = [r for r in records if r["correct"] and r.get("speedup") is not None]
    untimed = sum(1 for r in records if r["correct"] and r.get("speedup") is None)
    fast = sum(1 for r in timed if r["speedup"] > p) / n if timed and n else None
    note = ("no Apple GPU timings: speedup is null off Apple Silicon" if not timed else
            f"{untimed} correct cases without a timing count as not fast" if untimed else "")
    mean = (lambda key: round(sum(r[key] or 0 for r in records) / n, 3)) if n else None
    return {"cases": n, "compiled": sum(bool(r["compiled"]) for r in records),
            "correct": sum(bool(r["correct"]) for r in records),
            "compiled_pct": round(100 * sum(bool(r["compiled"]) for r in records) / n, 1)
            if n else None,
            "correct_pct": round(100 * sum(bool(r["correct"]) for r in records) / n, 1)
            if n else None,
            "p": p, "fast_p": None if fast is None else round(fast, 4), "fast_p_note": note,
            "mean_iterations": mean("iterations") if n else None,
            "wall_s_per_case": mean("wall_s") if n else None,
            "llm_tokens": sum(int(r.get("llm_tokens") or 0) for r in records)}


def metrics_line(m: dict) -> str:
    """One line of metrics for people."""
    if not m["cases"]:
        return "no cases finished"
    fast = (f"fast_{m['p']:g} {m['fast_p']:.0%}" if m["fast_p"] is not None else
            f"fast_{m['p']:g} null ({m['fast_p_note']})")
    return (f"{m['cases']} cases: compiled {m['compiled_pct']:g}% ({m['compiled']}), correct "
            f"{m['correct_pct']:g}% ({m['correct']}), {fast}, mean iterations "
            f"{m['mean_iterations']:g}, {m['wall_s_per_case']:g} s/case, "
            f"{m['llm_tokens']} LLM tokens")
