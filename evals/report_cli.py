"""`kport report`: render an eval run as report.md and one self-contained report.html.

    kport report RUN_DIR [--compare OTHER_RUN_DIR] [--out DIR]

RUN_DIR is the --out folder of `kport eval` (run.json, results.jsonl). With --compare the
report sets the two runs side by side (per case: correct in each, time in each), e.g. offline
vs llm, or before and after a knowledge-base change. The files go to --out (default RUN_DIR).
Exit 0 with the paths printed; 2 for a missing or malformed run folder (the file and line are
named).
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


@app.command()
def report(run_dir: Path = typer.Argument(..., help="a `kport eval` --out folder"),
           compare: Path = typer.Option(None, help="another run folder to set beside it"),
           out: Path = typer.Option(None, help="where report.md/html go (default RUN_DIR)")):
    """Write report.md and report.html of RUN_DIR (compared with --compare)."""
    from evals.report import load_run, write_report
    from evals.results import metrics_line

    md, page = write_report(run_dir, out or run_dir, compare)
    print(f"kport report: {metrics_line(load_run(run_dir).metrics)}")
    if compare is not None:
        print(f"  compared with {compare}: {metrics_line(load_run(compare).metrics)}")
    print(f"  {md}\n  {page}")


def main(argv: list[str]) -> int:
    """Entry of `kport report`."""
    return app(args=argv, prog_name="kport report", standalone_mode=True) or 0
