"""`kport eval`: port and judge many corpus cases in parallel; resumable JSON lines and metrics.

    kport eval [CORPUS_DIR | CASE_DIR | CASE_ID ...] [--mode offline|llm] [--workers N]
               [--executor local|ray] [--out DIR] [--resume] [--seeds N] [--timeout S]
               [--force]

Each case is one task in a worker process: offline, the translator's draft; llm, the porting
agent (needs KPORT_MODEL). Every port is judged by the cheat-proof harness (agent/harness.py).
OUT/results.jsonl gets one line per case as it finishes; OUT/run.json the settings, versions
and the metrics. --resume skips the cases already in results.jsonl. OUT must be new, empty or a
run folder of kport eval; one holding other files is refused before any case runs, unless
--force (agent/out_folder.py). Exit 0: every selected
case has its line; 1: some cases broke the harness (not recorded: --resume redoes them);
2: usage errors. docs/harness.md ("Batch runs and reports") describes the fields.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from agent.llm import connect
from agent.out_folder import check_out_folder
from corpus.cases import CaseError, discover, load_case
from corpus.check import compiled_by
from evals.eval_case import MODES, make_task, run_case
from evals.executors import make_executor
from evals.results import (
    RESULTS,
    RUN,
    append_result,
    cut_partial_tail,
    metrics,
    metrics_line,
    read_results,
    read_run,
    write_run,
)
from runners.errors import KportError
from runners.limits import seconds_option
from runners.sandbox import require_isolation
from runners.settings import load_settings

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


def select_cases(targets: list[str]) -> list:
    """The cases named by ``targets``: corpus folders (every case in them), case folders and
    case ids of the bundled corpus (exact or a number prefix: "001"); no targets: the whole
    bundled corpus. Raises CaseError for a path or id that names nothing, or one id twice."""
    if not targets:
        return discover()
    cases, ids = [], []
    for target in targets:
        path = Path(target)
        if (path / "case.toml").is_file():
            cases.append(load_case(path))
        elif path.is_dir():
            found = discover(path)
            if not found:
                raise CaseError(f"{path}: no case folders (with case.toml) in it")
            cases += found
        elif os.sep in target or target.startswith("."):
            raise CaseError(f"{target}: no such folder")
        else:
            ids.append(target)
    cases += discover(None, ids) if ids else []
    chosen: dict[str, object] = {}
    for case in cases:
        other = chosen.get(case.id)
        if other is not None and Path(other.folder).resolve() != Path(case.folder).resolve():
            raise CaseError(f"two cases are called {case.id}: {other.folder} and {case.folder}; "
                            "results are keyed by case id, so evaluate them in separate runs")
        chosen[case.id] = case
    return list(chosen.values())


def versions(executor: str) -> dict:
    """Versions a run depends on: kport, Python, numpy, mlx, the platform, ray when used and
    the git commit of the checkout when there is one."""
    out = {"python": platform.python_version(), "platform": platform.platform(),
           "machine": platform.machine()}
    for dist in ("kport", "numpy", "mlx") + (("ray",) if executor == "ray" else ()):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        out["git_commit"] = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
            text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        out["git_commit"] = None
    return out


def isolation_summary() -> str:
    """What the run's candidates run in; SandboxUnavailable before any worker starts when
    there is no jail and the user has not opted out (runners/sandbox.py)."""
    return require_isolation().summary()


def _check_llm() -> None:
    """KportError unless a model is configured and loadable (before any worker starts)."""
    if connect(load_settings()) is None:  # None: no model configured (offline)
        raise KportError("--mode llm needs KPORT_MODEL and the agent: set KPORT_MODEL to "
                         "provider:model (e.g. openai:gpt-4o; KPORT_BASE_URL for a local "
                         "server), pip install 'kport[llm]', or use --mode offline")


# What a run folder holds (`kport report` writes the reports into it); a damaged results.jsonl
# or run.json is named line by line by evals/results.py, not refused as the user's.
RUN_FILES = ("results.jsonl", "run.json", "run.json.tmp", "report.md", "report.html")


def _start_run(out: Path, resume: bool, settings: dict, executor: str,
               force: bool = False) -> tuple[dict, list]:
    """run.json's dict and the records already finished; KportError for a folder holding
    other files (unless ``force``), a used folder without --resume, or a resume with other
    settings than the run's."""
    check_out_folder(out, force=force, keep=RUN_FILES)
    out.mkdir(parents=True, exist_ok=True)
    records, partial = read_results(out)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if (records or partial) and not resume:
        raise KportError(f"{out / RESULTS}: already holds results; pass --resume to go on "
                         "with that run, or give another --out")
    if resume and (out / RUN).is_file():
        run = read_run(out)
        for key in ("mode", "seeds", "small"):
            if run["settings"].get(key, False if key == "small" else None) != settings[key]:
                raise KportError(f"{out / RUN}: the run used --{key} "
                                 f"{run['settings'].get(key)}, not {settings[key]}; resume it "
                                 "with the same, or give another --out")
        run.setdefault("resumed", []).append(now)
        run["settings"] = {**run["settings"], **settings}
    else:
        run = {"started": now, "settings": settings, "versions": versions(executor)}
    run["isolation"] = isolation_summary()
    run["compiler"] = compiled_by()  # who compiles candidates here
    if partial:
        cut_partial_tail(out)  # the case whose line a kill cut short is redone
    return run, records


def _speedup(value: float) -> float:
    """--fast-p: a finite speedup above zero (fast_p counts ports faster than p x the anchor)."""
    if not math.isfinite(value) or value <= 0:
        raise KportError(f"--fast-p {value}: give a positive speedup, e.g. 1.0 or 2")
    return value


@app.command()
def eval_(targets: list[str] = typer.Argument(None, help="corpus folder, case folders or case "
                                              "ids (default: the bundled corpus)"),
          mode: str = typer.Option("offline", help="offline (translator) or llm (the agent)"),
          workers: int = typer.Option(2, help="cases run at once"),
          executor: str = typer.Option("local", help="local (process pool) or ray"),
          out: Path = typer.Option(None, help="run folder (default: $KPORT_HOME/runs/...)"),
          resume: bool = typer.Option(False, help="go on with the run in --out, skipping the "
                                      "cases it finished"),
          seeds: int = typer.Option(3, min=3, help="seeds per size set (at least 3)"),
          timeout: float = typer.Option(900.0, min=1, help="wall-time budget per case, s",
                                        callback=seconds_option("--timeout")),
          fast_p: float = typer.Option(1.0, "--fast-p", help="speedup p of the fast_p metric",
                                       callback=_speedup),
          chip: str = typer.Option("M1", help="Apple chip the agent's lints assume"),
          small: bool = typer.Option(False, "--small", help="judge each case at its "
                                     "smallest size set only (a quick whole-corpus run)"),
          force: bool = typer.Option(False, "--force", help="use --out even when it holds "
                                     "files kport did not write (they are left alone)")):
    """Port and judge the selected cases; write results.jsonl, run.json and the metrics."""
    if mode not in MODES:
        raise KportError(f"--mode {mode!r}: one of {', '.join(MODES)}")
    if resume and out is None:
        raise KportError("--resume needs --out: the run folder to go on with")
    if mode == "llm":
        _check_llm()
    cases = select_cases(targets or [])
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = out or load_settings().runs_dir / f"eval-{mode}-{stamp}"
    settings = {"mode": mode, "workers": workers, "executor": executor, "seeds": seeds,
                "small": small,
                "timeout_s": timeout, "fast_p": fast_p, "chip": chip,
                "targets": list(targets or []), "cases": [c.id for c in cases]}
    run, done = _start_run(out, resume, settings, executor, force)
    write_run(out, run)
    finished = {r["case"] for r in done}
    tasks = [make_task(c, mode=mode, seeds=seeds, timeout=timeout, chip=chip, small=small)
             for c in cases if c.id not in finished]
    try:
        errors = _run_tasks(make_executor(executor, workers), run_case, tasks, out,
                            append_result) if tasks else []
    except KeyboardInterrupt:
        print(f"kport eval: interrupted; the finished cases are in {out / 'results.jsonl'}: "
              f"`kport eval ... --out {out} --resume` goes on", file=sys.stderr)
        raise typer.Exit(130) from None
    records = read_results(out)[0]
    run["metrics"] = metrics(records, fast_p)
    run["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    run["harness_errors"] = errors
    write_run(out, run)
    skipped = len(cases) - len(tasks)
    print(f"kport eval ({mode}): {metrics_line(run['metrics'])}"
          + (f"; {skipped} finished before (--resume)" if skipped else ""))
    print(f"  results: {out / 'results.jsonl'}\n  run:     {out / 'run.json'}\n"
          f"  report:  kport report {out}")
    for err in errors:
        print(f"  harness error (not recorded; --resume redoes it): {err}", file=sys.stderr)
    raise typer.Exit(1 if errors else 0)


def _run_tasks(ex, fn, tasks: list, out: Path, append) -> list[str]:
    """Run ``tasks`` on ``ex`` with a progress bar on stderr, appending each record as it
    comes; returns the harness errors as "case: error" lines."""
    errors = []
    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=Console(stderr=True)) as bar:
            job = bar.add_task("cases", total=len(tasks))
            for task, rec, err in ex.map_unordered(fn, tasks):
                if err:
                    errors.append(f"{task.case_id}: {err}")
                    bar.console.print(f"{task.case_id}: harness error: {err}")
                else:
                    append(out, rec)
                    verdict = "correct" if rec["correct"] else (
                        "rejected: " + (rec["reasons"][0][:100] if rec["reasons"] else "?"))
                    bar.console.print(f"{rec['case']}: {verdict} ({rec['wall_s']:.1f} s)")
                bar.advance(job)
    finally:
        ex.close()
    return errors


def main(argv: list[str]) -> int:
    """Entry of `kport eval`."""
    return app(args=argv, prog_name="kport eval", standalone_mode=True) or 0
