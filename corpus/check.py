"""Check corpus cases: the CUDA kernel in cuda_sim against its Python reference (when it has
one), and the Metal port in metal_sim against the oracle, at every size set and several seeds.

The oracle is the Python reference when the case names one, else the CUDA kernel run in
cuda_sim. Inputs are fresh per seed; a run with simulator findings fails even when the numbers
happen to match.
"""

from __future__ import annotations

import importlib.util
import io
import json
import platform
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

import runners
from corpus.cases import CaseError, CaseSpec, evaluate
from runners import structs
from runners.dtypes import DTYPES, Tensor, mx_dtype, to_mx
from runners.lifetime import temp_folder
from runners.sandbox import Jail, Limits, Mount, read_jailed
from runners.simbuild import Diagnostic


@dataclass
class Outcome:
    """One (case, size set, seed) check."""

    case: str
    sizes: dict[str, int]
    seed: int
    cuda: str = "-"  # ok | FAIL | ran (no reference to compare with) | error
    metal: str = "-"  # ok | FAIL | no port
    max_err: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.cuda in ("ok", "ran") and self.metal in ("ok", "no port")


def _bf16_bits(a: np.ndarray) -> np.ndarray:
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def as_float(a: np.ndarray, dtype: str) -> np.ndarray:
    """Values of a stored array as float64 (bfloat16 is stored as uint16 bits)."""
    if dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


NULL_STAND_IN = 8  # elements of the array that stands in for a null input (MLX: `device`)


def make_inputs(case: CaseSpec, sizes: dict[str, int], seed: int) -> dict:
    """Every argument's initial value for one size set and seed, in storage dtypes."""
    rng = np.random.default_rng(seed)
    values = {}
    for arg in case.args:
        storage = np.dtype(DTYPES[arg.dtype][0])
        where = f"{case.folder / 'case.toml'}: args.{arg.name}"
        if arg.role == "scalar":
            v = evaluate(arg.value, sizes, where + ".value")
            values[arg.name] = storage.type(v)
            continue
        if arg.fields:  # a struct by value: its bytes
            values[arg.name] = struct_input(arg, sizes, {}, where)
            continue
        if arg.null:  # nullptr in CUDA; in the port an unread stand-in and KP_HAS_<name> false
            values[arg.name] = np.zeros(NULL_STAND_IN, storage)
            continue
        shape = tuple(int(evaluate(s, sizes, where + ".shape")) for s in arg.shape)
        kind, *params = arg.init.split(":")
        if kind == "normal":
            data = rng.standard_normal(shape) * (float(params[0]) if params else 1.0)
        elif kind == "uniform":
            lo, hi = (float(params[0]), float(params[1])) if params else (0.0, 1.0)
            data = rng.uniform(lo, hi, shape)
        elif kind == "randint":
            data = rng.integers(int(params[0]), int(params[1]), shape)
        elif kind == "arange":
            data = np.arange(int(np.prod(shape))).reshape(shape)
        elif kind == "offsets":
            end = int(evaluate(":".join(params), sizes, where + ".init"))
            data = csr_offsets(int(np.prod(shape)), end, rng).reshape(shape)
        elif kind == "full":
            data = np.full(shape, float(params[0]))
        else:
            data = np.full(shape, 1 if kind == "ones" else 0)
        values[arg.name] = _bf16_bits(data) if arg.dtype == "bfloat16" else data.astype(storage)
    return values


def csr_offsets(count: int, end: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` sorted offsets from 0 to ``end`` (CSR row pointers: ``count - 1`` segments
    that cover 0..end), the inner ones distinct while ``end`` leaves room."""
    out, end = np.zeros(max(count, 0), np.int64), max(end, 0)
    if count >= 2:
        inner = count - 2
        pool = np.arange(1, end) if end - 1 >= inner else np.arange(0, end + 1)
        out[1:-1] = np.sort(rng.choice(pool, inner, replace=len(pool) < inner)) if inner else []
        out[-1] = end
    return out


def struct_input(arg, sizes: dict[str, int], given: dict, where: str) -> np.ndarray:
    """A struct argument's bytes: ``given`` fields, the others from their case values."""
    try:
        return structs.struct_bytes(arg.layout(), given, lambda v, path: evaluate(
            v, sizes, f"{where}.fields.{path}"))
    except ValueError as err:
        raise CaseError(f"{where}: {err}") from None


def launch_dims(exprs, sizes: dict[str, int], where: str) -> list[int]:
    """Evaluated grid/block dimensions; CaseError naming the key when one is not positive."""
    dims = [int(evaluate(e, sizes, where)) for e in exprs]
    if min(dims) < 1:
        raise CaseError(f"{where}: {list(exprs)} gives {dims} at sizes {sizes}; every "
                        "dimension must be at least 1")
    return dims


def run_cuda(case: CaseSpec, sizes: dict[str, int], inputs: dict, *, count: bool = False):
    """Run the CUDA kernel in cuda_sim; returns (outputs by name, record). ``count``: fill the
    record's performance counters (kport perf)."""
    where = f"{case.folder / 'case.toml'}: cuda"
    by_name = {a.name: a for a in case.args}
    copies = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    args = [_struct_arg(case, by_name[k], v, copies) if k in by_name and by_name[k].fields
            else np.uint64(0) if k in by_name and by_name[k].null  # a null pointer's bytes
            else v for k, v in copies.items() if not (k in by_name and by_name[k].field)]
    kernel = runners.get("cuda_sim").kernel((case.folder / case.cuda.source).read_text(),
                                            case.cuda.kernel, options=(f"-I{case.folder}",),
                                            filename=case.cuda.source)
    grid = launch_dims(case.cuda.grid, sizes, where + ".grid")
    block = launch_dims(case.cuda.block, sizes, where + ".block")
    smem = int(evaluate(case.cuda.shared_mem, sizes, where + ".shared_mem"))
    record = kernel.launch(grid, block, args, shared_mem=smem, count=count)
    outs = {a.name: copies[a.name] for a in case.args if a.role in ("out", "inout")}
    return outs, record


def _struct_arg(case: CaseSpec, arg, value: np.ndarray, arrays: dict):
    """A struct argument as cuda_sim takes it: its record, its pointer fields pointing at the
    arrays of the arguments that name them (``arrays``; a null one stays nullptr)."""
    return structs.with_pointers(arg.layout(), structs.struct_value(arg.layout(), value),
                                 structs.field_arrays(arg.name, case.args, arrays))


def run_reference(case: CaseSpec, sizes: dict[str, int], inputs: dict) -> dict:
    """The case's Python reference: ``fn(inputs, sizes) -> {output name: array}``. A bundled
    case's runs here; any other case folder is code from elsewhere, so its reference runs in
    the jail (runners/sandbox.py) and only the arrays it returns come back."""
    file, fn = case.check.reference.split(":")
    path = case.folder / file
    if not path.is_file():
        raise CaseError(f"{case.folder / 'case.toml'}: check.reference: {file} not found")
    copies = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    if not case.bundled:
        return _jailed_reference(case, file, fn, copies, sizes)
    spec = importlib.util.spec_from_file_location(f"kport_ref_{case.id}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, fn)(copies, dict(sizes))


def _jailed_reference(case: CaseSpec, file: str, fn: str, inputs: dict,
                      sizes: dict[str, int]) -> dict:
    child = Path(__file__).with_name("reference_child.py")
    prefixes = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    prefixes |= {p.resolve() for p in prefixes}
    where = f"{case.folder / 'case.toml'}: check.reference {case.check.reference}"
    with temp_folder("kport-ref-") as tmp:
        work = Path(tmp)
        np.savez(work / "inputs.npz", **{k: np.asarray(v) for k, v in inputs.items()})
        (work / "meta.json").write_text(json.dumps({
            "sizes": dict(sizes), "order": list(inputs),
            "scalars": {k: str(np.asarray(v).dtype) for k, v in inputs.items()
                        if not isinstance(v, np.ndarray)}}))
        jail = Jail([*map(Mount, sorted(prefixes)), Mount(case.folder.resolve()), Mount(child),
                     Mount(work, writable=True)], dev=True, env={"HOME": str(work)})
        ran = jail.run([sys.executable, "-I", str(child), str(case.folder.resolve()), file, fn,
                        str(work)], cwd=work, timeout=600, limits=Limits(memory=16 << 30))
        data = read_jailed(work / "outputs.npz", 1 << 32)
        if ran.returncode != 0 or data is None:
            last = (ran.output.strip().splitlines() or [f"exit code {ran.returncode}"])[-1]
            why = "it ran out of time" if ran.timed_out else last
            raise CaseError(f"{where}: the reference failed in the jail: {why}")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        except (ValueError, OSError) as err:
            raise CaseError(f"{where}: the reference returned no plain arrays ({err})") from None


def _template(case: CaseSpec, sizes: dict[str, int]) -> list[tuple[str, object]]:
    out = []
    nulls = {a.name for a in case.args if a.null}
    for name, value in case.metal.template.items():
        if name.startswith("KP_HAS_") and isinstance(value, bool):  # an optional input's flag
            value = name.removeprefix("KP_HAS_") not in nulls
        elif isinstance(value, str) and value in DTYPES:
            value = mx_dtype(value)
        elif isinstance(value, str):
            value = int(evaluate(value, sizes, f"{case.folder / 'case.toml'}: metal.template"))
        out.append((name, value))
    return out


def kernel_name(case: CaseSpec) -> str:
    """The name the Metal kernel is launched under: the case id less its number prefix
    ("001_saxpy" -> "saxpy"), made an identifier (a folder named "my-port" is a valid case id,
    but MLX names the kernel custom_kernel_<name>)."""
    name = re.sub(r"\W", "_", case.id.split("_", 1)[-1])
    return name if name[:1].isalpha() or name[:1] == "_" else f"k_{name}"


def _device(value: np.ndarray, arg) -> np.ndarray:
    """A 1-D input array of fewer than 8 elements padded to 8, as the package's run() pads it:
    MLX passes a smaller one in the `constant` address space, where the port's `device`
    pointers (its helper functions take them) cannot point."""
    if arg.role == "scalar" or value.ndim != 1 or value.size >= 8:
        return value
    return np.concatenate([value, np.zeros(8 - value.size, value.dtype)])


def run_metal(case: CaseSpec, sizes: dict[str, int], inputs: dict, *, count: bool = False):
    """Run the Metal port in metal_sim; returns (outputs by argument name, record). ``count``:
    fill the record's performance counters (kport perf)."""
    import mlx.core as mx  # lazy: MLX is heavy (Metal on macOS); only a Metal run needs it

    m, where = case.metal, f"{case.folder / 'case.toml'}: metal"
    by_name = {a.name: a for a in case.args}
    tensors = [to_mx(Tensor(_device(np.asarray(inputs[n]), by_name[n]), by_name[n].dtype))
               for n in m.inputs]
    out_args = [by_name[o] if o in by_name else by_name[o.removesuffix("_out")]
                for o in m.outputs]
    shapes = [tuple(int(evaluate(s, sizes, where + ".outputs")) for s in a.shape)
              for a in out_args]
    header = (case.folder / m.header).read_text() if m.header else ""
    args = (kernel_name(case), [m.names.get(n, n) for n in m.inputs],
            [m.names.get(n, n) for n in m.outputs], (case.folder / m.source).read_text(), header)
    launch = dict(
        inputs=tensors, output_shapes=shapes,
        output_dtypes=[mx_dtype(a.dtype) for a in out_args],
        grid=tuple(launch_dims(m.grid, sizes, where + ".grid")) + (1,) * (3 - len(m.grid)),
        threadgroup=tuple(launch_dims(m.threadgroup, sizes, where + ".threadgroup"))
        + (1,) * (3 - len(m.threadgroup)),
        template=_template(case, sizes) or None, init_value=m.init_value)
    sim = runners.get("metal_sim").kernel(*args, atomic_outputs=m.atomic_outputs)
    inplace = [i for i, a in enumerate(out_args) if a.role == "inout"]
    merge = inplace and not m.atomic_outputs and m.init_value is None
    record = sim.launch(**(launch | {"init_value": 0} if merge else launch), count=count)
    if record.compiled and apple_compiler():
        record = _apple_gate(record, args, m.atomic_outputs, launch)
    outs = {}
    for a, arr in zip(out_args, record.outputs, strict=False):
        outs[a.name] = np.array(arr.view(mx.uint16)) if a.dtype == "bfloat16" else np.array(arr)
    if merge and record.ok:
        # as the package's run() does (agent/kernel_template._in_place): a second run with
        # outputs starting as 1; an element that differs was not written and keeps the input
        again = sim.launch(**(launch | {"init_value": 1}))
        if not again.ok:
            return outs, again
        for i in (i for i in inplace if i < min(len(record.outputs), len(again.outputs))):
            a = out_args[i]
            other = np.array(again.outputs[i].view(mx.uint16)) if a.dtype == "bfloat16" \
                else np.array(again.outputs[i])
            written = outs[a.name].view(f"u{outs[a.name].itemsize}") == \
                other.view(f"u{other.itemsize}")
            given = np.asarray(inputs[a.name]).reshape(outs[a.name].shape)
            outs[a.name] = np.where(written, outs[a.name], given)
    return outs, record


def apple_compiler() -> str:
    """What compiles Metal here besides metal_sim: "Apple Metal compiler (MLX V, macOS V)" on
    a Mac with Metal, else "" (then only metal_sim's MSL rules stand between a port and
    Apple's compiler: docs/msl-rules.md lists what they catch and what they do not)."""
    if not runners.get("mlx_metal").available():
        return ""
    import mlx.core as mx  # lazy: as in run_metal

    return f"Apple Metal compiler (MLX {mx.__version__}, macOS {platform.mac_ver()[0]})"


def compiled_by() -> str:
    """One line for verdicts and reports: who compiled the candidates of this machine."""
    apple = apple_compiler()
    if apple:
        return f"{apple}, and metal_sim (MSL rules checked; sanitizers)"
    return ("metal_sim only (MSL rules checked: docs/msl-rules.md); not Apple's compiler, "
            "which has the last word on a Mac")


def _apple_gate(record, args: tuple, atomic_outputs: bool, launch: dict):
    """On a Mac the real compiler's verdict comes before any other: a kernel it rejects is a
    compile error whatever metal_sim said (not testable off a Mac: tests/conformance skip)."""
    real = runners.get("mlx_metal").kernel(*args, atomic_outputs=atomic_outputs).launch(**launch)
    if real.compiled:
        return record
    why = [Diagnostic(d.file, d.line, d.column, d.severity, "Apple's Metal compiler: "
                      + d.message) for d in real.diagnostics]
    return replace(record, compiled=False, diagnostics=why + list(record.diagnostics))


def compare(case: CaseSpec, want: dict, got: dict) -> tuple[bool, float, str]:
    """All of ``want``'s outputs matched within the case tolerances? (ok, max error, why)."""
    by_name = {a.name: a for a in case.args}
    worst = 0.0
    for name, expected in want.items():
        if name not in got:
            return False, worst, f"output {name!r} missing"
        dtype = by_name[name].dtype if name in by_name else "float32"
        e, g = as_float(np.asarray(expected), dtype), as_float(np.asarray(got[name]), dtype)
        if e.shape != g.shape and e.size == g.size:
            g = g.reshape(e.shape)
        if e.shape != g.shape:
            return False, worst, f"{name}: shape {g.shape}, expected {e.shape}"
        if np.isnan(g).any() and not np.isnan(e).any():
            return False, worst, f"{name}: NaN in the result (an unwritten output?)"
        if _poisoned(np.asarray(got[name]), dtype, np.asarray(expected)):
            return False, worst, (f"{name}: metal_sim's fill of fresh outputs (0xBE bytes) "
                                  "in the result (an unwritten output?)")
        diff = np.abs(e - g)
        worst = max(worst, float(np.nanmax(diff, initial=0.0)))
        bad = ~np.isclose(g, e, rtol=case.check.rtol, atol=case.check.atol, equal_nan=True)
        if bad.any():
            first = np.unravel_index(np.argmax(bad), bad.shape)
            return False, worst, (f"{name}: {int(bad.sum())} of {bad.size} elements differ, "
                                  f"first at {tuple(int(i) for i in first)}: "
                                  f"{g[first]:.6g} vs {e[first]:.6g}")
    return True, worst, ""


def _poisoned(got: np.ndarray, dtype: str, want: np.ndarray) -> bool:
    """Whether an integer output holds metal_sim's fill of fresh outputs (runners.dtypes.
    poison: 0xBE bytes) where the oracle has something else: elements the port never wrote."""
    storage = np.dtype(DTYPES[dtype][0]) if dtype in DTYPES else got.dtype
    if storage.kind not in "iu" or dtype == "bfloat16" or got.dtype != storage:
        return False
    mark = np.frombuffer(b"\xbe" * storage.itemsize, storage)[0]
    flat_got, flat_want = got.reshape(-1), want.reshape(-1)
    return flat_got.size == flat_want.size and bool(
        ((flat_got == mark) & (flat_want != mark)).any())


def check_case(case: CaseSpec, seeds: int | None = None) -> list[Outcome]:
    """Check one case at every size set and seed."""
    results = []
    for sizes in case.size_sets():
        for seed in range(seeds or case.check.seeds):
            try:
                results.append(_check_one(case, sizes, seed))
            except CaseError as err:  # a bad case is a failed check, reported with the rest
                results.append(Outcome(case.id, sizes, seed, "error", "-", notes=[str(err)]))
    return results


def _findings_text(record) -> str:
    if not record.compiled:
        return "compile error: " + "; ".join(str(d) for d in record.diagnostics[:3])
    return "; ".join(str(f) for f in record.findings[:3])


def _check_one(case: CaseSpec, sizes: dict[str, int], seed: int) -> Outcome:
    out = Outcome(case.id, sizes, seed)
    inputs = make_inputs(case, sizes, seed)
    cuda_out, cuda_run = run_cuda(case, sizes, inputs)
    if not cuda_run.ok:
        out.cuda = "error"
        out.notes.append("cuda: " + _findings_text(cuda_run))
    if case.check.reference == "cuda":
        oracle = cuda_out if cuda_run.ok else None
        if cuda_run.ok:
            out.cuda = "ran"
    else:
        oracle = run_reference(case, sizes, inputs)
        if cuda_run.ok:
            ok, err, why = compare(case, oracle, cuda_out)
            out.cuda = "ok" if ok else "FAIL"
            out.max_err = err
            if why:
                out.notes.append(f"cuda: {why}")
    if case.metal is None:
        out.metal = "no port"
        return out
    if oracle is None:
        out.metal = "FAIL"
        out.notes.append("metal: no oracle (the CUDA kernel failed)")
        return out
    metal_out, metal_run = run_metal(case, sizes, inputs)
    if not metal_run.ok:
        out.metal = "FAIL"
        out.notes.append("metal: " + _findings_text(metal_run))
        return out
    ok, err, why = compare(case, oracle, metal_out)
    out.metal = "ok" if ok else "FAIL"
    out.max_err = max(out.max_err, err)
    if why:
        out.notes.append(f"metal: {why}")
    return out


def case_features(case: CaseSpec) -> list[str]:
    """What a case exercises, read from its CUDA source and launch (for `kport corpus list`)."""
    text = (case.folder / case.cuda.source).read_text()
    probes = {
        "shared memory": r"__shared__", "dynamic shared": r"extern\s+__shared__",
        "warp shuffles": r"__shfl", "warp votes": r"__ballot|__any_sync|__all_sync",
        "atomics": r"\batomic\w+\(", "templates": r"\btemplate\s*<", "half": r"__half|half2",
        "bfloat16": r"bfloat16", "barriers": r"__syncthreads",
        "tensor cores": r"\bwmma\b|\bmma_sync\b|\bmma\.sync",
        "cooperative groups": r"cooperative_groups",
    }

    found = [name for name, pattern in probes.items() if re.search(pattern, text)]
    if case.metal:
        port = (case.folder / case.metal.source).read_text()
        if "simdgroup_matrix" in port or "simdgroup_float8x8" in port:
            found.append("simdgroup_matrix port")
    return found
