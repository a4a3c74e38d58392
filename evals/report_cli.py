"""`kport report`: render an eval run as report.md and one self-contained report.html.

    kport report RUN_DIR [--compare OTHER_RUN_DIR] [--out DIR]

RUN_DIR is the --out folder of `kport eval` (run.json, results.jsonl). With --compare the
report sets the two runs side by side (per case: correct in each, time in each), e.g. offline
vs llm, or before and after a knowledge-base change. The files go to --out (default RUN_DIR),
each replaced atomically; an --out other than RUN_DIR must be new, empty or a report folder of
kport's (one holding other files is refused unless --force; agent/out_folder.py). Exit 0 with
the paths printed; 2 for a missing or malformed run folder (the file and line are named) or a
refused --out.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import typer

from agent.out_folder import check_out_folder, write_folder
from evals.report import load_run, write_report
from evals.results import metrics_line

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


@app.command()
def report(run_dir: Path = typer.Argument(..., help="a `kport eval` --out folder"),
           compare: Path = typer.Option(None, help="another run folder to set beside it"),
           out: Path = typer.Option(None, help="where report.md/html go (default RUN_DIR)"),
           force: bool = typer.Option(False, "--force", help="write into --out even when it "
                                      "holds files kport did not write (they are left alone)")):
    """Write report.md and report.html of RUN_DIR (compared with --compare)."""
    beside = out is None or (out.is_dir() and out.resolve() == run_dir.resolve())
    if not beside:
        check_out_folder(out, force=force)
    load_run(run_dir)  # a bad run folder is named before anything is written
    if compare is not None:
        load_run(compare)
    if beside:  # into the run folder: each file through a temporary one and a rename
        with tempfile.TemporaryDirectory(prefix=".kport-report-", dir=run_dir) as tmp:
            for made in write_report(run_dir, Path(tmp), compare):
                os.replace(made, run_dir / made.name)
        md, page = run_dir / "report.md", run_dir / "report.html"
    else:
        write_folder(out, lambda stage: write_report(run_dir, stage, compare),
                     command="kport report", force=force)
        md, page = out / "report.md", out / "report.html"
    print(f"kport report: {metrics_line(load_run(run_dir).metrics)}")
    if compare is not None:
        print(f"  compared with {compare}: {metrics_line(load_run(compare).metrics)}")
    print(f"  {md}\n  {page}")


def main(argv: list[str]) -> int:
    """Entry of `kport report`."""
    return app(args=argv, prog_name="kport report", standalone_mode=True) or 0
