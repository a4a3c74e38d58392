"""`kport perf` — predict a CUDA kernel's time on a GPU from cuda_sim's counters.

    kport perf FILE.cu --kernel K --chip M2|H200 [--size n=...] [--shape ...] [--grid G --block B]
               [--case DIR] [-I DIR] [-D NAME=V] [--json]

The kernel runs once in cuda_sim at the given sizes with counting on (runners/simcore/rt/
counters.cpp); the cost model (runners/perf_model.py) turns the counters and the chip's
parameters (kb/rules/arch/perf_chips.toml) into a predicted time and a bottleneck breakdown.
Validated on an NVIDIA H200 (docs/perf-model.md); Apple-GPU predictions use the same method
with Apple parameters and are unvalidated until measured on a Mac. Exit 0, or 2 on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from agent.port_cli import _load_inputs, parse_shapes, parse_sizes
from agent.translate_cli import _dims
from corpus.check import launch_dims, make_inputs, run_cuda
from kb.arch import ArchError
from kb.perf_chips import perf_chip
from runners.cli_options import define_option, include_option
from runners.errors import KportError
from runners.lifetime import temp_folder
from runners.perf_model import Launch, arithmetic_estimate, predict

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


@app.command()
def perf(file: Path = typer.Argument(..., help="the CUDA source (.cu / .cuh)"),
         kernel: str = typer.Option(None, help="kernel name (with template arguments if any)"),
         chip: str = typer.Option("M2", help="chip to predict for: an Apple chip or H200"),
         case: Path = typer.Option(None, help="a case folder (case.toml): sizes and launch"),
         size: list[str] = typer.Option([], help="NAME=INT; repeat (overrides case sizes)"),
         shape: list[str] = typer.Option([], help="NAME=DIM,DIM (no --case only); repeat"),
         grid: str = typer.Option(None, help="CUDA grid in blocks (no --case only)"),
         block: str = typer.Option(None, help="CUDA block in threads (no --case only)"),
         shared_mem: str = typer.Option(None, "--shared-mem", help="dynamic shared memory in "
                                        "bytes, a number or an expression over the sizes"),
         include: list[Path] = include_option(), define: list[str] = define_option(),
         as_json: bool = typer.Option(False, "--json", help="print the prediction as JSON")):
    """Predict FILE's kernel time on --chip and say what bounds it."""
    if file.suffix == ".metal":
        raise KportError(f"{file}: kport perf reads CUDA sources only for now (Metal counting "
                         "is not wired into metal_sim's launch yet); pass the .cu kernel")
    if not file.is_file():
        raise KportError(f"{file}: no such file")
    try:
        params = perf_chip(chip)
    except ArchError as err:
        raise KportError(f"--chip {chip}: {err}") from None
    with temp_folder("kport-perf-") as tmp:
        src, kname, spec, _, _ = _load_inputs(
            file, kernel, case, parse_sizes(size), parse_shapes(shape), _dims(grid),
            _dims(block), Path(tmp), "perf", include, define, shared_mem)
        sizes = dict(spec.sizes)
        where = f"{file}: launch"
        g = launch_dims(spec.cuda.grid, sizes, where + ".grid")
        b = launch_dims(spec.cuda.block, sizes, where + ".block")
        _, record = run_cuda(spec, sizes, make_inputs(spec, sizes, 0), count=True)
    if not record.compiled or not record.counters:
        why = "; ".join(map(str, record.diagnostics or record.findings))[:300]
        raise KportError(f"{file}: {kname} did not run in cuda_sim ({why or 'no counters'}); "
                         "fix the kernel or its sizes first (kport sim runs it alone)")
    launch = Launch(groups=g[0] * g[1] * g[2], threads_per_group=b[0] * b[1] * b[2])
    pred = predict(record.counters, launch, params, arithmetic_estimate(src, kname))
    out = {"kernel": kname, "chip": params.name, "sizes": sizes, "grid": g, "block": b,
           **pred.as_dict(), "counters": record.counters,
           "validated": params.name == "H200"}
    if as_json:
        print(json.dumps(out, indent=1))
        return
    print(f"{kname} on {params.name}: {pred.predicted_s * 1e6:.1f} µs predicted, bound by "
          f"{pred.bottleneck} (occupancy {pred.occupancy:.0%})")
    for term, secs in sorted(pred.terms_s.items(), key=lambda kv: -kv[1]):
        print(f"  {term:8s} {secs * 1e6:10.2f} µs")
    for note in pred.notes:
        print(f"  note: {note}")
    if params.name != "H200":
        print("  (Apple-GPU predictions are unvalidated until measured on a Mac: "
              "docs/perf-model.md)")


def main(argv: list[str]) -> int:
    """Entry of `kport perf`."""
    return app(args=argv, prog_name="kport perf", standalone_mode=True) or 0
