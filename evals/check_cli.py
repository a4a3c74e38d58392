"""`kport check`: judge one candidate Metal port of a corpus case through the cheat-proof
harness.

    kport check CASE_DIR --metal BODY.metal [--header HEADER.metal] [--seeds N] [--json]

The candidate is an MLX metal_kernel body written for the case's [metal] launch keys (inputs,
outputs, grid, threadgroup, template). It must pass metal_sim's MSL allow-list, then it is
compiled and run only in the jail (bubblewrap namespaces, a read-only view, Landlock and
seccomp; docs/harness.md); the parent makes the inputs, runs the oracle and compares, at every
size set of the case and at one held-out size set drawn for this run. A case folder is code:
the bundled corpus's references run in kport itself, any other case folder's reference and CUDA
kernel run in the jail too. Each run of the candidate has --timeout seconds (the harness
child's start and the run); compiling is not counted: it happens first, under
KPORT_COMPILE_TIMEOUT per step, tried twice. Where the OS gives no jail, --unsandboxed runs it
anyway (unprotected; the verdict says so). Exit 0 only when it is accepted, 1 when it is rejected
(the reasons are printed), 2 for usage errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from agent.harness import judge
from corpus.cases import CaseError, load_case
from runners.errors import KportError
from runners.limits import seconds_option

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


@app.command()
def check(case_dir: Path = typer.Argument(..., help="a corpus case folder (with case.toml)"),
          metal: Path = typer.Option(..., "--metal", help="the candidate body (.metal)"),
          header: Path = typer.Option(None, "--header", help="its header (.metal)"),
          seeds: int = typer.Option(3, help="seeds per size set (at least 3)"),
          timeout: float = typer.Option(120.0, help="seconds each run may take before it "
                                        "counts as a hang; compiling is not counted "
                                        "(KPORT_COMPILE_TIMEOUT)",
                                        callback=seconds_option("--timeout")),
          as_json: bool = typer.Option(False, "--json", help="print the verdict as JSON")):
    """Accept or reject a candidate port; exit 0 only when accepted.

    The candidate is compiled and run only in the jail (docs/harness.md).
    It is judged at every size set of the case and at one held-out size set.
    A case folder is code: only the bundled corpus's references run outside the jail.
    --unsandboxed: where the OS gives no jail, run anyway, unprotected (the verdict says so).
    """
    case = load_case(case_dir)
    if case.metal is None:
        raise CaseError(f"{case_dir / 'case.toml'}: no [metal] section: the launch keys a "
                        "candidate is judged with are missing")
    texts = []
    for p in (metal, header):
        try:
            texts.append(p.read_text() if p is not None else "")
        except (OSError, UnicodeDecodeError) as err:
            raise KportError(f"{p}: cannot read ({err})") from None
    verdict = judge(case, texts[0], texts[1], seeds=seeds, timeout=timeout)
    if as_json:
        print(json.dumps({"case": case.id, **verdict.as_json()}, indent=1))
    else:
        print(f"{case.id}: {'ACCEPTED' if verdict.accepted else 'REJECTED'} "
              f"({len(verdict.runs)} runs)")
        print(f"  isolation: {verdict.isolation}")
        print(f"  compiled by: {verdict.compiler}")
        for r in verdict.reasons:
            print(f"  - {r}")
    raise typer.Exit(0 if verdict.accepted else 1)


def main(argv: list[str]) -> int:
    """Entry of `kport check`."""
    return app(args=argv, prog_name="kport check", standalone_mode=True) or 0
