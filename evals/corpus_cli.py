"""`kport corpus`: list the kernel corpus, and check its cases in the simulators.

    kport corpus list [--json]
    kport corpus check [ID ...] [--seeds N] [--json]

`check` runs every case (or the given ids or number prefixes, e.g. 012) at every size set: the
CUDA kernel in cuda_sim against the case's Python reference when it has one, and the Metal port
in metal_sim against the oracle. It prints a table and exits 1 on any failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from corpus.cases import discover
from corpus.check import case_features, check_case

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True,
                  help=__doc__.splitlines()[0])
ROOT = typer.Option(None, "--root", help="a corpus folder other than the bundled corpus/cases")


@app.command("list")
def list_cases(root: Path = ROOT,
               as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Show the cases with their category and what each exercises."""
    cases = discover(root)
    rows = [{"id": c.id, "category": c.category, "title": c.title,
             "metal_port": c.metal is not None, "sizes": 1 + len(c.variants),
             "exercises": case_features(c)} for c in cases]
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table(title=f"kport corpus: {len(rows)} cases")
    for column in ("id", "category", "title", "port", "exercises"):
        table.add_column(column, overflow="fold")
    for r in rows:  # titles hold brackets (out[idx[i]]): not rich markup
        table.add_row(escape(r["id"]), r["category"], escape(r["title"]),
                      "yes" if r["metal_port"] else "-", ", ".join(r["exercises"]))
    Console().print(table)


@app.command("check")
def check(ids: list[str] = typer.Argument(None, help="case ids or number prefixes; all if none"),
          seeds: int = typer.Option(None, min=1, max=10,
                                    help="seeds per size set (default: the case's own)"),
          root: Path = ROOT,
          as_json: bool = typer.Option(False, "--json", help="one JSON object per check")):
    """Run the cases in the simulators; exit 1 on any failure."""
    outcomes = []
    console = Console(stderr=as_json)
    for case in discover(root, ids or None):
        results = check_case(case, seeds)
        outcomes += results
        if as_json:
            for o in results:
                print(json.dumps({"case": o.case, "sizes": o.sizes, "seed": o.seed,
                                  "cuda": o.cuda, "metal": o.metal, "max_err": o.max_err,
                                  "ok": o.ok, "notes": o.notes}))
        else:
            bad = [o for o in results if not o.ok]
            mark = "[green]ok[/]" if not bad else f"[red]{len(bad)} FAILED[/]"
            console.print(f"{case.id}: {len(results)} runs {mark}", highlight=False)
    failed = [o for o in outcomes if not o.ok]
    if not outcomes:
        console.print("[red]no cases found[/]: nothing was checked")
        raise typer.Exit(1)
    if not as_json and failed:
        table = Table(title="failures")
        for column in ("case", "sizes", "seed", "cuda", "metal", "max err", "notes"):
            table.add_column(column, overflow="fold")
        for o in failed:
            table.add_row(o.case, ",".join(f"{k}={v}" for k, v in o.sizes.items()), str(o.seed),
                          o.cuda, o.metal, f"{o.max_err:.3g}", escape(" | ".join(o.notes)[:400]))
        console.print(table)
    if not as_json:
        console.print(f"{len(outcomes) - len(failed)} of {len(outcomes)} runs passed "
                      f"({len({o.case for o in outcomes})} cases)")
    raise typer.Exit(1 if failed else 0)


def main(argv: list[str]) -> int:
    """Entry of `kport corpus`."""
    return app(args=argv, prog_name="kport corpus", standalone_mode=True) or 0
