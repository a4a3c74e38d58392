"""`kport perf` — predict a kernel's time on a GPU from the simulators' counters.

    kport perf FILE.cu|FILE.metal --kernel K --chip M2|H200 [--size n=...] [--shape ...]
               [--grid G --block B] [--case DIR] [-I DIR] [-D NAME=V] [--json]

The kernel runs once in cuda_sim or metal_sim at the given sizes with counting on
(runners/simcore/rt/counters.cpp; a .metal file: agent/perf_metal_cli.py); the cost model
(runners/perf_model.py) turns the counters and the chip's parameters (kb/rules/arch/
perf_chips.toml) into a predicted time and a bottleneck breakdown.
Validated on an NVIDIA H200 (docs/perf-model.md); Apple-GPU predictions use the same method
with Apple parameters and are unvalidated until measured on a Mac. Exit 0, or 2 on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from agent.perf_metal_cli import is_library, predict_body, predict_library
from agent.port_cli import _load_inputs, parse_shapes, parse_sizes
from agent.translate_cli import _dims
from corpus.check import launch_dims, make_inputs, run_cuda
from kb.arch import ArchError
from kb.perf_chips import perf_chip
from runners.cli_options import define_option, include_option
from runners.errors import KportError
from runners.lifetime import temp_folder
from runners.perf_model import Launch, arithmetic_estimate, predict
from runners.sizeexpr import SizeExprError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


@app.command()
def perf(file: Path = typer.Argument(..., help="the CUDA source (.cu / .cuh) or a .metal file"),
         kernel: str = typer.Option(None, help="kernel name (with template arguments if any)"),
         chip: str = typer.Option("M2", help="chip to predict for: an Apple chip or H200"),
         case: Path = typer.Option(None, help="a case folder (case.toml): sizes and launch"),
         size: list[str] = typer.Option([], help="NAME=INT; repeat (overrides case sizes)"),
         shape: list[str] = typer.Option([], help="NAME=DIM,DIM (no --case only); repeat; a "
                                         ".metal kernel's buffer lengths"),
         grid: str = typer.Option(None, help="grid in blocks / threadgroups (no --case only)"),
         block: str = typer.Option(None, help="block / threadgroup in threads"),
         shared_mem: str = typer.Option(None, "--shared-mem", help="dynamic shared memory in "
                                        "bytes, a number or an expression over the sizes"),
         include: list[Path] = include_option(), define: list[str] = define_option(),
         as_json: bool = typer.Option(False, "--json", help="print the prediction as JSON")):
    """Predict FILE's kernel time on --chip and say what bounds it."""
    if not file.is_file():
        raise KportError(f"{file}: no such file")
    try:
        params = perf_chip(chip)
    except ArchError as err:
        raise KportError(f"--chip {chip}: {err}") from None
    if file.suffix == ".metal":
        try:
            out = _metal(file, kernel, params.name, case, parse_sizes(size),
                         parse_shapes(shape), _dims(grid), _dims(block), shared_mem)
        except SizeExprError as err:
            raise KportError(f"{file}: {err}") from None
        return _print(out["prediction"], out, params.name, as_json)
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
    pred.counters = record.counters
    _print(pred, {"kernel": kname, "sizes": sizes, "grid": g, "block": b}, params.name, as_json)


def _metal(file: Path, kernel, chip: str, case, sizes, shapes, grid, block, shared_mem) -> dict:
    """kernel, sizes, grid (threadgroups), block and prediction of a .metal file's kernel."""
    text = file.read_text(errors="replace")
    if is_library(text):
        if case is not None:
            raise KportError(f"{file}: --case describes an MLX kernel body, and this file is a "
                             "standalone library; give --grid, --block and --shape instead")
        return predict_library(file, text, kernel, chip, sizes, shapes, grid, block,
                               shared_mem)
    with temp_folder("kport-perf-") as tmp:
        return predict_body(file, text, case, chip, sizes, grid, block, Path(tmp))


def _print(pred, about: dict, chip: str, as_json: bool) -> None:
    """The prediction as JSON (``as_json``) or as a few lines of text."""
    out = {"kernel": about["kernel"], "chip": chip, "sizes": about["sizes"],
           "grid": list(about["grid"]), "block": list(about["block"]), **pred.as_dict(),
           "validated": chip == "H200"}
    kname = about["kernel"]
    if as_json:
        print(json.dumps(out, indent=1))
        return
    print(f"{kname} on {chip}: {pred.predicted_s * 1e6:.1f} µs predicted, bound by "
          f"{pred.bottleneck} (occupancy {pred.occupancy:.0%})")
    for term, secs in sorted(pred.terms_s.items(), key=lambda kv: -kv[1]):
        print(f"  {term:8s} {secs * 1e6:10.2f} µs")
    for note in pred.notes:
        print(f"  note: {note}")
    if chip != "H200":
        print("  (Apple-GPU predictions are unvalidated until measured on a Mac: "
              "docs/perf-model.md)")


def main(argv: list[str]) -> int:
    """Entry of `kport perf`."""
    return app(args=argv, prog_name="kport perf", standalone_mode=True) or 0
