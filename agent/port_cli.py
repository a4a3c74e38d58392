"""`kport port`: port one CUDA kernel end to end and write the output package.

    kport port FILE.cu --kernel NAME [-I DIR] [-D NAME=V] [--case CASE_DIR] --out DIR
               [--offline] [--size n=1024 ...] [--shape x=rows,n ...] [--grid G --block B]
               [--shared-mem BYTES] [--learn] [--thread ID]

FILE is read where it sits, as nvcc reads it (agent/cuda_source.py: its folder and each -I DIR
for local headers, each -D, the #if groups clang skips left out); the port and its oracle work
on the device code the kernel needs of it (agent.translate.cuda_closure), every line naming the
file and line it came from.

The agent (agent/graph.py) drafts, checks against the oracle at every size set and seed,
repairs and optimises within the budgets; DIR gets kernel.py, kernel.metal, report.md/json,
test_kernel.py and the oracle (see agent/package.py). Without --case the case is guessed
(case.guessed.toml in DIR: correct it and rerun with --case DIR/case.guessed.toml). DIR must be
new, empty or an earlier package of kport's (replaced whole); a folder holding other files is
refused before any work unless --force (agent/out_folder.py). Exit 0: accepted (correct at
every size set); 1: not accepted (the package still holds the evidence); 2: usage errors.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import typer

from agent.case_guess import GUESSED, device_code, guess_case, load_case_arg, with_sizes
from agent.cuda_source import kernel_not_named
from agent.llm import connect, redact
from agent.out_folder import check_out_folder, folder_files, write_folder
from agent.package import copy_guessed_case, write_package
from agent.report import build_report, shipped, write_report
from agent.state import Budget, PortContext
from agent.translate_cli import _dims
from corpus.cases import CaseError
from kb.lints import resolve_family
from runners.cli_options import define_option, include_option
from runners.cuda_sim.reading import line_origins
from runners.errors import KportError
from runners.lifetime import temp_folder
from runners.limits import seconds_option
from runners.settings import load_settings

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


def parse_sizes(items: list[str]) -> dict[str, int]:
    """['n=1024', 'rows=8'] -> {'n': 1024, 'rows': 8}; KportError for anything else."""
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        if not name.strip().isidentifier() or not value.strip().lstrip("-").isdigit() \
                or int(value) < 1:
            raise KportError(f"--size {item!r}: write NAME=INT with a positive integer, "
                             "e.g. --size n=1024")
        out[name.strip()] = int(value)
    return out


def parse_shapes(items: list[str]) -> dict[str, list]:
    """['x=rows,n'] -> {'x': ['rows', 'n']} (numbers become ints)."""
    out = {}
    for item in items:
        name, _, dims = item.partition("=")
        if not name.strip().isidentifier() or not dims.strip():
            raise KportError(f"--shape {item!r}: write NAME=DIM,DIM, e.g. --shape x=rows,n")
        out[name.strip()] = [int(d) if d.isdigit() else d for d in _dims(dims)]
    return out


def _load_inputs(file: Path, kernel: str | None, case_dir: Path | None, sizes, shapes,
                 grid, block, staging: Path, out_name: str, include=(), define=(),
                 shared_mem: str | None = None):
    """(src: the kernel's device code, kernel, case, guessed, guessed folder) for the CLI's
    arguments."""
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise KportError(f"{file}: cannot read ({err})") from None
    if case_dir is not None:
        case = load_case_arg(case_dir, staging / "case")
        if kernel and kernel.split("<")[0] != case.cuda.kernel.split("<")[0]:
            raise KportError(f"--kernel {kernel}: the case ports {case.cuda.kernel!r}")
        cuda = case.folder / case.cuda.source
        src, _ = device_code(file, case.cuda.kernel, include, define)
        # the case's source is FILE, or (a guessed case) the device code read from it
        if cuda.resolve() != file.resolve() and cuda.read_text() not in (text, src):
            raise KportError(f"{file} is not the case's CUDA source {cuda} (nor the device "
                             "code of it a guessed case holds); pass that file, with the -I "
                             "and -D it was guessed with")
        return src, case.cuda.kernel, with_sizes(case, sizes), [], None
    if not kernel:
        raise kernel_not_named(file, text)
    folder = staging / out_name  # the case id must be the name of the folder it ends up in
    try:
        case, guessed = guess_case(file, kernel, folder, sizes=sizes, grid=grid, block=block,
                                   shapes=shapes, include=include, define=define,
                                   shared_mem=shared_mem)
    except CaseError as err:  # it names a scratch file the user never sees: say what to change
        why = str(err).removeprefix(f"{folder / 'case.toml'}: ")
        raise KportError(f"{file}: the case guessed for {kernel} does not hold: {why}; pass "
                         "other --size/--shape/--grid/--block, or write a case.toml "
                         "(docs/corpus.md) and pass --case") from None
    return (folder / case.cuda.source).read_text(), case.cuda.kernel, case, guessed, folder


def case_files_in(case_arg: Path | None, out: Path) -> list[str]:
    """The files of a --case that lives in the --out folder (a corrected case.guessed.toml and
    its sources): the new package carries them, so replacing the folder loses none."""
    if case_arg is None or not out.is_dir():
        return []
    folder = case_arg if case_arg.is_dir() else case_arg.parent
    if folder.resolve() != out.resolve():
        return []
    package = {"kernel.py", "kernel.metal", "test_kernel.py", "oracle.json", "report.md",
               "report.json"}
    return [rel for rel in folder_files(out) if rel not in package and not
            (rel.startswith("oracle_") and rel.endswith(".npz"))]


@app.command()
def port(file: Path = typer.Argument(..., help="the CUDA source (.cu / .cuh)"),
         kernel: str = typer.Option(None, help="kernel name (with template arguments if any)"),
         case: Path = typer.Option(None, help="a case folder (case.toml): roles, sizes, oracle"),
         out: Path = typer.Option(..., help="folder for the output package"),
         offline: bool = typer.Option(False, help="no LLM even if KPORT_MODEL is set"),
         size: list[str] = typer.Option([], help="NAME=INT; repeat (overrides case sizes)"),
         shape: list[str] = typer.Option([], help="NAME=DIM,DIM (no --case only); repeat"),
         grid: str = typer.Option(None, help="CUDA grid in blocks (no --case only)"),
         block: str = typer.Option(None, help="CUDA block in threads (no --case only)"),
         shared_mem: str = typer.Option(None, "--shared-mem", help="dynamic shared memory of "
                                        "the launch in bytes, a number or an expression over "
                                        "the sizes (no --case only)"),
         include: list[Path] = include_option(), define: list[str] = define_option(),
         learn: bool = typer.Option(False, help="add an accepted port to the KB"),
         thread: str = typer.Option(None, help="checkpoint thread id: resumes it if it exists"),
         iterations: int = typer.Option(6, min=1, help="candidates checked, at most"),
         tokens: int = typer.Option(60_000, min=0, help="LLM token budget"),
         wall: float = typer.Option(900.0, min=1, help="wall-time budget, seconds",
                                    callback=seconds_option("--wall")),
         optimise: int = typer.Option(3, min=0, help="optimisation candidates: mechanical "
                                      "rewrites offline, LLM rewrites with a model (0: none)"),
         chip: str = typer.Option("M1", help="Apple chip the lints and the cost model assume"),
         seeds: int = typer.Option(None, min=1, max=10, help="seeds per size set"),
         no_kb: bool = typer.Option(False, "--no-kb", help="no retrieval from the KB"),
         as_json: bool = typer.Option(False, "--json", help="print report.json"),
         force: bool = typer.Option(False, "--force", help="write into --out even when it holds "
                                    "files kport did not write (those are left alone)")):
    """Port FILE's kernel to Metal for MLX and write the package into --out."""
    # lazy: agent.session imports langgraph (~0.5 s); `kport port --help` does without it
    from agent.session import learn as learn_pair
    from agent.session import new_thread_id, run_port

    given = [flag for flag, v in (("--shape", shape), ("--grid", grid), ("--block", block),
                                  ("--shared-mem", shared_mem)) if v]
    if case is not None and given:
        raise KportError(f"{', '.join(given)}: with --case the launch and shapes are the "
                         "case's; change them in its case.toml")
    carry = case_files_in(case, out)
    check_out_folder(out, force=force, keep=carry)  # before any work: nothing is lost later
    sizes, shapes = parse_sizes(size), parse_shapes(shape)
    resolve_family(chip)  # an unknown chip is a usage error before any work
    settings = load_settings()
    llm = None if offline else connect(settings)
    budget = Budget(iterations=iterations, tokens=tokens, wall_s=wall, optimise=optimise)
    with temp_folder("kport-port-") as tmp:
        src, kname, spec, guessed, guessed_dir = _load_inputs(
            file, kernel, case, sizes, shapes, _dims(grid), _dims(block), Path(tmp),
            out.resolve().name, include, define, shared_mem)
        ctx = PortContext(case=spec, src=src, kernel=kname, where=str(file),
                          origin=line_origins(src, file.name), llm=llm,
                          budget=budget, chip=chip, seeds=seeds, use_kb=not no_kb,
                          deadline=time.monotonic() + wall)
        result = run_port(ctx, settings, thread or new_thread_id(kname))
        state = result.values
        cand = shipped(state)
        notes = []
        if result.resumed:
            notes.append(f"resumed from checkpoint thread {result.thread_id}")
        accepted = state.get("best") is not None
        if learn and accepted:
            counts = learn_pair(spec, cand, settings)
            notes.append(f"--learn: added the port to the KB ({counts['added']} new chunks)")
        elif learn:
            notes.append("--learn: nothing added (the port was not accepted)")
        rep: dict = {}

        def fill(stage: Path) -> None:
            nonlocal rep
            package = {"files": ["report.md", "report.json"]}
            if cand is not None:
                package = write_package(stage, case=spec, kernel=state["kernel"],
                                        candidate=cand, guessed_case=guessed_dir)
            elif guessed_dir is not None:
                package["files"] += copy_guessed_case(guessed_dir, stage)
            for rel in carry:  # the user's corrected case, kept from the folder replaced
                (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(out / rel, stage / rel)
            package["files"] += carry
            rep = build_report(state, source=str(file), case=spec,
                               mode="llm" if llm else "offline",
                               llm_name=llm.name if llm else None,
                               base_url=llm.base_url if llm else None,
                               thread_id=result.thread_id, chip=chip, budget=budget,
                               guessed=guessed, package=package,
                               extra_notes=list(package.get("oracle_notes", [])) + notes)
            write_report(stage, rep)

        write_folder(out, fill, command="kport port", force=force, keep=carry)
    if as_json:
        print(redact(json.dumps(rep, indent=1, default=str)))
    else:
        runs = rep["validation"]["runs"]
        good = sum(r["metal"] == "ok" for r in runs)
        print(redact(f"kport port: {rep['status'].upper()} {state['kernel']} -> {out} "
                     f"({good}/{len(runs)} runs correct; {rep['mode']}; "
                     f"thread {result.thread_id})\n  {rep['stop_reason']}"))
        for line in [rep["kb"], rep["performance"].get("note", ""), *rep["notes"]]:
            if line:
                print(redact(f"  {line}"))
        if guessed:
            print(f"  guessed case: {out / GUESSED} (check it; rerun with --case "
                  f"{out / GUESSED})")
    raise typer.Exit(0 if accepted else 1)


def main(argv: list[str]) -> int:
    """Entry of `kport port`."""
    return app(args=argv, prog_name="kport port", standalone_mode=True) or 0
