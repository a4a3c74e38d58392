"""`kport sim`: run a CUDA kernel (.cu), an MLX metal_kernel body (.metal) or a kernel of a
standalone .metal file in a simulator on inputs from .npy files, and show the outputs or what
went wrong.

CUDA:  kport sim saxpy.cu --kernel saxpy --grid 4 --block 256 \\
           --arg x=x.npy --arg y=y.npy --arg a=float32:2.0 --arg n=int32:1000
MLX body: kport sim body.metal --input x=x.npy --output y=float32:4,16 --grid 64 \\
           --threadgroup 32
.metal file: kport sim lib.metal --kernel scale --grid 100 --threadgroup 32 \\
           --arg 0=x.npy --arg 1=zeros:float32:100 --arg 2=uint32:100   (NAME = buffer index)
A .cu file's quoted includes are found as nvcc finds them: in its own folder, then in each
-I DIR; -D NAME[=VALUE] defines a macro (both repeatable).
Arguments: NAME=file.npy (an array), NAME=DTYPE:VALUE (a scalar),
NAME=zeros:DTYPE:SHAPE (a fresh array); for a .cu kernel NAME is its parameter's name, in any
order (one it does not have, or a parameter left out, is an error). Outputs are printed,
and saved as .npy with --save DIR.
Launch sizes are checked against CUDA's or Metal's limits and array sizes against what one
simulated launch may hold before anything runs. --save refuses to replace an existing file
unless --force.
Exit 0 when the run is clean, 1 when the kernel faulted or failed to compile, 2 for bad input.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import typer

from runners import limits
from runners.cli_options import define_option, include_option
from runners.cuda_sim import RawKernel, parameter_names
from runners.cuda_sim.reading import nvcc_options
from runners.dtypes import DTYPES
from runners.errors import KportError
from runners.metal_sim import MetalLibrary, metal_kernel


class SimUsageError(KportError):
    """A bad `kport sim` argument; names the flag and the fix."""


def _dims(text: str, flag: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise SimUsageError(f"{flag} {text!r}: give 1 to 3 comma-separated integers") from None
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise SimUsageError(f"{flag} {text!r}: give 1 to 3 positive integers")
    return dims + (1,) * (3 - len(dims))


def _load_npy(name: str, path: str) -> np.ndarray:
    file = Path(path)
    if not file.is_file():
        raise SimUsageError(f"{name}={path}: no such file")
    try:
        mapped = np.load(file, allow_pickle=False, mmap_mode="r")  # size known before reading
        if not isinstance(mapped, np.ndarray):
            raise ValueError("an .npz archive, not one array")
        limits.check_bytes(mapped.nbytes, f"{name}={path}")
        if mapped.dtype.kind not in "biuf" or mapped.dtype.byteorder == ">":
            raise ValueError(f"dtype {mapped.dtype} is not a kernel argument type")
        return np.array(mapped)
    except (ValueError, OSError) as err:
        raise SimUsageError(f"{name}={path}: not a readable .npy file ({err})") from None


def read_source(path: Path, flag: str = "") -> str:
    """A kernel source file's text; SimUsageError for a binary or unreadable file."""
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise SimUsageError(f"{flag}{path}: not a text source file (it is not UTF-8)") from None
    except OSError as err:
        raise SimUsageError(f"{flag}{path}: cannot read it ({err.strerror})") from None


def _scalar(name: str, dtype: np.dtype, text: str):
    try:
        value = float(text) if dtype.kind == "f" else int(text, 0)
    except ValueError:
        raise SimUsageError(f"{name}: {text!r} is not a {dtype.name} value") from None
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise SimUsageError(f"{name}: {value} does not fit {dtype.name} ({info.min} to "
                                f"{info.max})")
    elif dtype.kind == "f" and np.isfinite(value) and abs(value) > float(np.finfo(dtype).max):
        raise SimUsageError(f"{name}: {text} is beyond the range of {dtype.name}")
    return dtype.type(value)


def _dtype(name: str, text: str) -> np.dtype:
    if text not in DTYPES or text == "bfloat16":
        raise SimUsageError(f"{name}: unknown dtype {text!r}; one of "
                            f"{', '.join(d for d in DTYPES if d != 'bfloat16')}")
    return np.dtype(DTYPES[text][0])


def parse_arg(spec: str):
    """NAME=file.npy | NAME=DTYPE:VALUE | NAME=zeros:DTYPE:SHAPE -> (name, value)."""
    name, sep, value = spec.partition("=")
    if not sep or not name:
        raise SimUsageError(f"--arg {spec!r}: write NAME=file.npy, NAME=DTYPE:VALUE or "
                            "NAME=zeros:DTYPE:SHAPE")
    if value.endswith(".npy"):
        return name, _load_npy(name, value)
    parts = value.split(":")
    if parts[0] == "zeros" and len(parts) == 3:
        try:
            shape = tuple(int(v) for v in parts[2].split(","))
        except ValueError:
            raise SimUsageError(f"{name}: the shape {parts[2]!r} must be integers") from None
        return name, np.zeros(_shape(shape, f"{name}=zeros:{parts[1]}:{parts[2]}",
                                     _dtype(name, parts[1])), _dtype(name, parts[1]))
    if len(parts) == 2:
        return name, _scalar(name, _dtype(name, parts[0]), parts[1])
    raise SimUsageError(f"--arg {spec!r}: write NAME=file.npy, NAME=DTYPE:VALUE or "
                        "NAME=zeros:DTYPE:SHAPE")


def _shape(shape: tuple[int, ...], where: str, dtype: np.dtype) -> tuple[int, ...]:
    """A shape the user asked for: positive sides and no more bytes than a launch may hold."""
    limits.check_shape(shape, dtype.itemsize, where)
    return shape


def _all_bytes(arrays) -> None:
    total = sum(v.nbytes for v in arrays if isinstance(v, np.ndarray))
    limits.check_bytes(total, "the arrays of this launch together")


def _save_target(save: Path | None, names: list[str], force: bool) -> None:
    """Refuse, before running, a --save that would replace files (unless --force)."""
    if save is None:
        return
    if save.exists() and not save.is_dir():
        raise SimUsageError(f"--save {save}: a file, not a folder; name a folder")
    taken = [save / f"{n}.npy" for n in names if (save / f"{n}.npy").exists()]
    if taken and not force:
        raise SimUsageError(f"--save {save}: {taken[0].name} is there already; name another "
                            "folder or pass --force to replace it")


def _launch(call):
    """Run a simulator launch; its argument errors (ValueError, as MLX and CuPy raise them)
    are the user's and come back as one line."""
    try:
        return call()
    except ValueError as err:
        raise SimUsageError(str(err).removeprefix("[metal_kernel] ")) from None


def _report(findings, diagnostics, outputs: dict, printf: str, as_json: bool, save: Path | None):
    if save:
        save.mkdir(parents=True, exist_ok=True)
        for name, arr in outputs.items():
            np.save(save / f"{name}.npy", arr)
    if as_json:
        print(json.dumps({
            "ok": not findings and not any(d.severity == "error" for d in diagnostics),
            "diagnostics": [str(d) for d in diagnostics],
            "findings": [str(f) for f in findings],
            "printf": printf,
            "outputs": {k: np.asarray(v).tolist() for k, v in outputs.items()},
        }))
        return
    for d in diagnostics:
        print(d)
    for f in findings:
        print(f"finding: {f}")
    if printf:
        print("printf output:\n" + printf, end="" if printf.endswith("\n") else "\n")
    with np.printoptions(threshold=64, edgeitems=4, precision=5):
        for name, arr in outputs.items():
            print(f"{name} {arr.dtype}{list(arr.shape)}:\n{arr}")


def cuda_options(path: Path, include: list[Path], define: list[str]) -> tuple[str, ...]:
    """cuda_sim.nvcc_options, a bad one a usage error."""
    try:
        return nvcc_options(path, include, define)
    except ValueError as err:
        raise SimUsageError(str(err)) from None


def _by_parameter(params: list[str], kernel: str, parsed: list[tuple[str, object]]):
    """The --arg values in the kernel's parameter order, matched by NAME (a name that is not a
    parameter, one given twice or a parameter left out is a usage error: bound by position, a
    misspelt or reordered --arg ran the kernel on the wrong buffers without a word). Where the
    signature cannot be read (``params`` empty) or a parameter has no name, the order given
    is kept."""
    if not params or "" in params:
        return parsed
    named = {}
    for name, value in parsed:
        if name not in params:
            raise SimUsageError(f"--arg {name}: `{kernel}` has no parameter {name!r}; its "
                                f"parameters, in order: {', '.join(params)}")
        if name in named:
            raise SimUsageError(f"--arg {name}: given twice")
        named[name] = value
    missing = [p for p in params if p not in named]
    if missing:
        raise SimUsageError(f"--arg: no value for parameter {missing[0]!r} of `{kernel}` "
                            f"(its parameters, in order: {', '.join(params)})")
    return [(p, named[p]) for p in params]


def run_cuda(path: Path, kernel: str, grid, block, args: list[str], shared_mem: int,
             options: tuple[str, ...] = ()):
    limits.check_cuda_launch(grid, block, "--grid/--block/--shared-mem", shared_mem)
    source = read_source(path)
    parsed = _by_parameter(parameter_names(source, kernel), kernel,
                           [parse_arg(a) for a in args])
    values = [v for _, v in parsed]
    _all_bytes(values)
    k = RawKernel(source, kernel, options, filename=path.name)
    run = _launch(lambda: k.launch(grid, block, values, shared_mem=shared_mem))
    arrays = {n: v for n, v in parsed if isinstance(v, np.ndarray)} if run.compiled else {}
    return run.findings, run.diagnostics, arrays, run.printf


def run_metal_file(path: Path, kernel: str, grid, tg, args: list[str]):
    limits.check_metal_launch(grid, tg, "--grid/--threadgroup")
    buffers = {}
    for spec in args:
        name, value = parse_arg(spec)
        if not name.isdigit():
            raise SimUsageError(f"--arg {spec!r}: name the buffer index, e.g. 0=x.npy")
        buffers[int(name)] = value
    _all_bytes(buffers.values())
    fn = _launch(lambda: MetalLibrary(read_source(path), filename=path.name).function(kernel))
    run = _launch(lambda: fn.launch(buffers, grid=grid, threadgroup=tg))
    arrays = {f"buffer{i}": v for i, v in buffers.items() if isinstance(v, np.ndarray)}
    return run.findings, run.diagnostics, arrays if run.compiled else {}, run.printf


def run_metal(path: Path, grid, tg, inputs: list[str], outputs: list[str], header: Path | None):
    import mlx.core as mx  # lazy: MLX is heavy (Metal on macOS); only an MLX body needs it

    limits.check_metal_launch(grid, tg, "--grid/--threadgroup")
    parsed = [parse_arg(a) for a in inputs]
    out_specs = []
    for spec in outputs:
        name, sep, rest = spec.partition("=")
        dtype, sep2, shape = rest.partition(":")
        if not (sep and sep2):
            raise SimUsageError(f"--output {spec!r}: write NAME=DTYPE:SHAPE, e.g. y=float32:4,16")
        _dtype(name, dtype)
        try:
            dims = tuple(int(v) for v in shape.split(","))
        except ValueError:
            raise SimUsageError(f"--output {spec!r}: the shape must be integers") from None
        _shape(dims, f"--output {spec}", np.dtype(DTYPES[dtype][0]))
        out_specs.append((name, getattr(mx, dtype), dims))
    for name in [n for n, _ in parsed] + [n for n, _, _ in out_specs]:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            raise SimUsageError(f"{name!r}: inputs and outputs of an MLX body are named like "
                                "kernel parameters (letters, digits, _)")
    # MLX pastes the name into the kernel's: keep it an identifier whatever the file is called
    name = re.sub(r"\W", "_", path.stem)
    _all_bytes([v for _, v in parsed] + [np.empty(0)])
    k = _launch(lambda: metal_kernel(
        name if name[:1].isalpha() else "k_" + name, [n for n, _ in parsed],
        [n for n, _, _ in out_specs], read_source(path),
        read_source(header, "--header ") if header else ""))
    run = _launch(lambda: k.launch(
        inputs=[v for _, v in parsed], output_shapes=[s for *_, s in out_specs],
        output_dtypes=[d for _, d, _ in out_specs], grid=grid, threadgroup=tg))
    arrays = {n: np.array(a) for (n, _, _), a in zip(out_specs, run.outputs, strict=False)}
    # the simulator names MLX's two parts source.metal and header.metal: say the user's files
    files = {"source.metal": str(path), "header.metal": str(header) if header else ""}
    return ([_in_user_files(f, files) for f in run.findings],
            [_in_user_files(d, files) for d in run.diagnostics], arrays, run.printf)


def _in_user_files(record, files: dict[str, str]):
    """A diagnostic or finding with its file named as the user named it."""
    return dataclasses.replace(record, file=files.get(record.file) or record.file)


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


@app.command(help=__doc__)
def sim(
    file: Path = typer.Argument(..., help="a .cu file, or a .metal metal_kernel body"),
    kernel: str = typer.Option("", help="the __global__ function / kernel of a .metal file"),
    grid: str = typer.Option("1", help=".cu: blocks; .metal: threads (MLX convention)"),
    block: str = typer.Option("", help=".cu: threads per block"),
    threadgroup: str = typer.Option("", help=".metal: threads per threadgroup"),
    arg: list[str] = typer.Option([], help=".cu: arguments in order; .metal file: INDEX=..."),
    input: list[str] = typer.Option([], help=".metal: inputs in order"),
    output: list[str] = typer.Option([], help=".metal: outputs NAME=DTYPE:SHAPE"),
    header: Path = typer.Option(None, help=".metal: helper functions file"),
    shared_mem: int = typer.Option(0, help=".cu: dynamic shared memory in bytes"),
    include: list[Path] = include_option(),
    define: list[str] = define_option(),
    save: Path = typer.Option(None, help="save outputs as DIR/NAME.npy"),
    force: bool = typer.Option(False, "--force", help="--save may replace existing .npy files"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    if not file.is_file():
        raise SimUsageError(f"{file}: no such file")
    if header is not None and not header.is_file():
        raise SimUsageError(f"--header {header}: no such file")
    if file.suffix in (".cu", ".cuh"):
        names = [a.partition("=")[0] for a in arg]
    elif kernel:
        names = [f"buffer{a.partition('=')[0]}" for a in arg]
    else:
        names = [o.partition("=")[0] for o in output]
    _save_target(save, names, force)
    if file.suffix in (".cu", ".cuh"):
        if not kernel or not block:
            raise SimUsageError("a .cu file needs --kernel NAME and --block X[,Y,Z]")
        result = run_cuda(file, kernel, _dims(grid, "--grid"), _dims(block, "--block"), arg,
                          shared_mem, cuda_options(file, include, define))
    elif file.suffix == ".metal" and kernel:
        if not threadgroup:
            raise SimUsageError("a .metal kernel needs --threadgroup X[,Y,Z]")
        result = run_metal_file(file, kernel, _dims(grid, "--grid"),
                                _dims(threadgroup, "--threadgroup"), arg)
    elif file.suffix == ".metal":
        if not output or not threadgroup:
            raise SimUsageError("a .metal body needs --output NAME=DTYPE:SHAPE and --threadgroup")
        result = run_metal(file, _dims(grid, "--grid"), _dims(threadgroup, "--threadgroup"),
                           input, output, header)
    else:
        raise SimUsageError(f"{file}: expected a .cu or .metal file")
    findings, diagnostics = result[0], result[1]
    _report(*result, as_json, save)
    failed = bool(findings) or any(d.severity == "error" for d in diagnostics)
    raise typer.Exit(1 if failed else 0)


def main(argv: list[str]) -> int:
    """Entry of `kport sim`."""
    return app(args=argv, prog_name="kport sim", standalone_mode=True) or 0
