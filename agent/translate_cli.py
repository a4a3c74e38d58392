"""`kport translate`: the offline translator's draft of one CUDA kernel, with its coverage.

    kport translate FILE.cu --kernel NAME [-I DIR] [-D NAME=V] [--case CASE] [--grid G]
                    [--block B] [--json]

FILE is read as nvcc reads it in its tree (agent/cuda_source.py): its folder and each -I DIR
searched for local headers, each -D defined, the #if groups clang skips left out; every
TODO names the file and line it was written at. Prints the Metal draft (header +
metal_kernel body), the MLX call (inputs, outputs, grid in threads, threadgroup, template
arguments) and the coverage: every CUDA construct the rules know, mapped or left as a
KPORT-TODO with its rule, file and line. With --case (a case folder, its
case.toml, or a port package's case.guessed.toml) the roles and launch come from the case;
otherwise roles are inferred (const pointer: in; written: out or inout) and the launch is the
--grid/--block you give (blocks and threads per block, as in CUDA).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import typer

from agent.case_guess import load_case_arg
from agent.cuda_source import kernel_not_named, read_cuda, stub_note
from agent.translate import translate_kernel
from corpus.candidate import Candidate
from runners.cli_options import define_option, include_option

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


def _dims(text: str | None) -> list | None:
    """'ceil_div(n, 256), rows' -> ['ceil_div(n, 256)', 'rows']: commas inside brackets stay."""
    if text is None:
        return None
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([" and 1 or 0
        depth -= ch in ")]" and 1 or 0
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [p for p in [*parts, cur.strip()] if p]


def translation_json(tr) -> dict:
    """The machine-readable form of a Translation (also used by `kport port` reports): the
    kernel, its candidate (corpus.candidate.Candidate's fields but origin and error), the
    roles and the coverage."""
    port = Candidate.from_translation(tr).model_dump(exclude={"origin", "error"})
    return {"kernel": tr.kernel, **port, "roles": tr.roles,
            "coverage": round(tr.coverage, 4), "mapped": dict(tr.mapped),
            "unmapped": dict(tr.unmapped), "rules_used": tr.rules_used,
            "todos": [{"rule": t.rule, "construct": t.construct, "file": t.file,
                       "line": t.line, "metal": t.metal} for t in tr.todos],
            "notes": tr.notes, "guessed": tr.guessed}


@app.command()
def translate(file: Path = typer.Argument(..., help="the CUDA source (.cu / .cuh)"),
              kernel: str = typer.Option(None, help="kernel name, with template arguments "
                                         "if it has any: 'softmax<256>'"),
              case: Path = typer.Option(None, help="a case folder, its case.toml or a "
                                        "package's case.guessed.toml"),
              grid: str = typer.Option(None, help="CUDA grid in blocks: 'ceil_div(n,256)' or "
                                       "'rows,1,1'"),
              block: str = typer.Option(None, help="CUDA block in threads: '256'"),
              include: list[Path] = include_option(), define: list[str] = define_option(),
              as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Translate one kernel offline and show what was mapped and what is left to do."""
    roles = None
    shared_mem: str | int = 0
    if case is not None:
        with tempfile.TemporaryDirectory(prefix="kport-case-") as tmp:
            spec = load_case_arg(case, Path(tmp))
        roles = {a.name: a.role for a in spec.args}
        kernel = kernel or spec.cuda.kernel
        grid_v, block_v, shared_mem = spec.cuda.grid, spec.cuda.block, spec.cuda.shared_mem
    else:
        grid_v, block_v = _dims(grid), _dims(block)
    view = read_cuda(file, include, define)  # first: an unreadable file says so
    if not kernel:
        raise kernel_not_named(file, view.text)
    tr = translate_kernel(view.text, kernel, roles=roles, grid=grid_v, block=block_v,
                          shared_mem=shared_mem, where=str(file), origin=view.origin)
    if note := stub_note(view):
        tr.notes.append(note)
    if as_json:
        print(json.dumps(translation_json(tr), indent=1))
        return
    print(tr.metal_source())
    print("// MLX call")
    print(f"//   inputs={tr.inputs}, outputs={tr.outputs}")
    print(f"//   grid={tr.grid or '(blocks * block per axis: pass --grid/--block)'}, "
          f"threadgroup={tr.threadgroup or '(the CUDA block)'}")
    if tr.template:
        print(f"//   template={tr.template}")
    if tr.atomic_outputs:
        print(f"//   atomic_outputs=True, init_value={tr.init_value}")
    for note in tr.guessed:
        print(f"// guessed: {note}")
    for note in tr.notes:
        print(f"// note: {note}")
    total = sum(tr.mapped.values()) + sum(tr.unmapped.values())
    print(f"// coverage: {sum(tr.mapped.values())} of {total} construct occurrences mapped "
          f"({tr.coverage:.0%}); {len(tr.todos)} KPORT-TODO")
    for t in tr.todos:
        print(f"//   TODO {t.file or file.name}:{t.line}: {t.construct} ({t.rule}) -> {t.metal}")


def main(argv: list[str]) -> int:
    """Entry of `kport translate`."""
    return app(args=argv, prog_name="kport translate", standalone_mode=True) or 0
