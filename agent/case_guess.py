"""A case for a kernel that comes without one (`kport port FILE.cu` with no --case): roles and
element types from the translator, sizes from --size, and guesses for everything else, each
guess listed so the report can say what to check. The result is a real case folder (case.toml
plus the kernel's device code, ``<stem>.device.cu``: the file read as nvcc reads it in its tree,
cut to what the kernel needs, agent/cuda_source.py), valid for corpus.cases.load_case, whose
oracle is the CUDA kernel itself run in cuda_sim. The output package holds it as
case.guessed.toml (never case.toml, which may be the user's); the user corrects it and runs
again with --case DIR/case.guessed.toml, which load_case_arg reads.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import tomli_w

from agent.case_contracts import size_contracts, variant_sizes
from agent.cuda_source import read_cuda, stub_note
from agent.host_consts import constant_compiler
from agent.host_init import c_literal, output_fills
from agent.host_launch import find_launches, instantiations, matches, size_names
from agent.shape_probe import ArgProbe, probe_shapes
from agent.size_relations import SizeRelations
from agent.stride_probe import measure_strides
from agent.translate import cuda_closure, translate_kernel
from agent.translate.analyze import TYPE_DTYPES, template_params
from agent.translate.macros import template_parts
from corpus.cases import CATEGORIES, CaseError, evaluate, load_case
from kb.features import guess_category
from runners.cuda_sim.reading import SourceView
from runners.errors import KportError
from runners.structs import buffer_size

GUESSED = "case.guessed.toml"  # the guessed case's name in an output package
# A package's own files, never part of the case a --case copy is loaded from.
_PACKAGE_FILES = ("oracle_*.npz", "oracle.json", "kernel.py", "kernel.metal", "test_kernel.py",
                  "report.md", "report.json", ".kport-*", "__pycache__", ".pytest_cache")


def case_toml(data: dict) -> str:
    """TOML text for a case dict (tomli-w; empty lists left out, as the case format reads a
    missing key)."""
    return tomli_w.dumps({k: v for k, v in data.items() if v != []})


# C's size types as the arrays and scalars of a case hold them (LP64, as nvcc on Linux)
_SIZE_TYPES = {"size_t": "uint64", "ptrdiff_t": "int64", "ssize_t": "int64",
               "unsigned long": "uint64", "long int": "int64", "intptr_t": "int64",
               "uintptr_t": "uint64"}


def _dtype(name: str, ctype: str, template: dict | None = None, enums=(),
           why: str = "") -> str:
    """The dtype of an argument of C type ``ctype``; a template type parameter takes the
    type the kernel's name gives it (``op_clamp_kernel<float>``: ``T`` is float32). ``why``:
    what the translator said of it (a ``void *`` it could not type)."""
    words = ctype.replace("const", " ").replace("__restrict__", " ").replace("*", " ").split()
    spelled = " ".join(words)
    bound = (template or {}).get(spelled)
    if spelled.startswith("enum ") or spelled in (enums or ()):
        return "int32"  # an enum's value, as C passes an unscoped enum of int range
    dtype = TYPE_DTYPES.get(spelled) or _SIZE_TYPES.get(spelled) or (
        bound if bound in TYPE_DTYPES.values() else None)
    if dtype is None:
        raise KportError(f"cannot guess the element type of argument {name!r} ({ctype!r})"
                         + (f": {why}" if why else "") + "; write a case.toml for it "
                         "(docs/corpus.md) and pass --case")
    return dtype


def device_code(src_path: Path, kernel: str, include=(), define=()) -> tuple[str, SourceView]:
    """(the device code ``kernel`` needs of ``src_path`` read in its tree, cuda_closure's,
    ``#line`` directives naming where each part was written; the file as read)."""
    view = read_cuda(src_path, include, define)
    return cuda_closure(view.text, kernel, where=src_path.name, origin=view.origin), view


def guess_case(src_path: Path, kernel: str, folder: Path, *, sizes: dict[str, int],
               grid: list | None = None, block: list | None = None,
               shapes: dict[str, list] | None = None, include=(), define=(),
               shared_mem: str | int | None = None) -> tuple[object, list[str]]:
    """Write a case for ``kernel`` of ``src_path`` (read as nvcc reads it with ``include``
    and ``define``) into ``folder`` (its name is the case id); returns (CaseSpec, what was
    guessed). ``shared_mem``: the launch's dynamic shared memory in bytes (an expression over
    the sizes), else 0. Raises KportError for a kernel or argument it cannot describe, and
    CaseError if the result does not validate."""
    view = read_cuda(src_path, include, define)
    kernel, picked = resolve_kernel(view.text, kernel, str(src_path))
    src = cuda_closure(view.text, kernel, where=src_path.name, origin=view.origin)
    source = f"{src_path.stem}.device.cu"
    tr = translate_kernel(src, kernel, where=str(src_path))
    if tr.struct_problems:
        name, why = next(iter(tr.struct_problems.items()))
        raise KportError(f"{src_path}: {kernel}: struct parameter {name!r} cannot be passed "
                         f"yet: {why} (kport passes structs of scalars and fixed arrays: "
                         "docs/translate.md)")
    enums = set(re.findall(r"\benum\s+(?:class\s+|struct\s+)?([A-Za-z_]\w*)", src)) | set(
        re.findall(r"\btypedef\s+enum\b[^;{]*\{[^}]*\}\s*([A-Za-z_]\w*)\s*;", src))
    guessed: list[str] = [f"roles inferred by the translator: {tr.roles}", *picked]
    headers = sorted(set(view.files) - {src_path.name})
    guessed.append(f"CUDA source: {source}, the device code {tr.kernel} needs of "
                   f"{src_path.name}" + (f" and {', '.join(headers)}" if headers else "")
                   + " (host code left out; #line directives say where each part is from)")
    if note := stub_note(view):
        guessed.append(note)
    ints = [n for n, r in tr.roles.items() if r == "scalar"
            and _dtype(n, tr.dtypes.get(n, ""), tr.template, enums).startswith(("int", "uint"))]
    launch, values, unread = None, {}, set()
    constants = constant_compiler(src, source)  # Ktraits::kSmemSize, compiled when named
    if grid is None and block is None:
        launch, values, unread = _host_launch(view, kernel, list(tr.roles), ints, sizes,
                                              constants=constants)
    elif sizes:  # the launch typed by hand: the host's arguments still say the scalars
        launch, values, unread = _host_launch(view, kernel, list(tr.roles), ints, sizes,
                                              config=False, constants=constants)
        if launch is not None:
            guessed.append(f"kernel scalars from the host launch in {launch.host} at "
                           f"{view.where(launch.line)}: {values}")
    host = launch  # the launch whose arguments say nullptr, fills and vectors
    if grid is not None or block is not None:
        launch = None  # its grid and block are not the ones typed
    if launch is not None:
        grid, block = launch.grid, launch.block
        shared_mem = launch.shared_mem if shared_mem is None else shared_mem
        ints = size_names([*grid, *block, str(shared_mem or 0), *values.values()])
        guessed.append(f"CUDA launch from the host code: {launch.host} at "
                       f"{view.where(launch.line)}: grid {grid}, block {block}, dynamic "
                       f"shared memory {shared_mem or 0}; kernel scalars {values}")
    if not sizes:
        # every array is guessed flat over the product of the sizes: keep that product small
        # (64**3 at most; with many int parameters each one gets smaller), never PiB
        each = 1024 if len(ints) == 1 else 64 if len(ints) <= 3 else max(2, 2 ** (18 // len(ints)))
        sizes = {n: each for n in ints} or {"n": 1024}
        guessed.append(f"sizes {sizes} (no --size given)")
    elements = " * ".join(sizes) if len(sizes) > 1 else next(iter(sizes))
    fills = _fills(view, kernel, host)
    args, flat = [], []
    for name, role in tr.roles.items():
        if name in tr.structs:
            parts = host.vectors.get(list(tr.roles).index(name)) if host else None
            args.append(_struct_arg(name, *tr.structs[name], sizes, guessed, parts))
            continue

        dtype = _dtype(name, tr.dtypes.get(name, ""), tr.template, enums, next(
            (n.split(": ", 1)[1] for n in tr.notes if n.startswith(f"{name}: a void *")), ""))
        if role == "scalar":
            if name in values:
                value = values[name]
            elif name in sizes and name not in unread:
                value = name
            elif c_literal(tr.defaults.get(name)) is not None:
                value = c_literal(tr.defaults[name])
                guessed.append(f"scalar {name} = {value}, its C++ default (run() may omit it)")
                args.append({"name": name, "role": role, "dtype": dtype, "value": value,
                             "default": True})
                continue
            else:
                value = 1 if dtype.startswith(("int", "uint")) else True if dtype == "bool" \
                    else 1.5
                guessed.append(f"scalar {name} = {value}")
            args.append({"name": name, "role": role, "dtype": dtype, "value": value})
            continue
        init = ("zeros" if role == "out" else "normal" if dtype.startswith(("float", "bfloat"))
                else "randint:0:4")
        if role == "out" and list(tr.roles).index(name) in fills:
            init = _fill_init(name, fills[list(tr.roles).index(name)], guessed)
        arg = {"name": name, "role": role, "dtype": dtype, "shape": None, "init": init}
        if name in tr.flat:
            arg["field"] = tr.flat[name]
        passed = _passed(host, list(tr.roles).index(name))
        if name in tr.nullable and passed in ("nullptr", "NULL", "0"):
            args.append(arg | {"null": True, "shape": [8]})
            guessed.append(f"{name}: null, as the host launch passes it ({passed}); the "
                           f"package's run() takes {name}=None or an array")
            continue
        if name in tr.nullable and not passed and not dtype.startswith(("float", "bfloat")):
            # optional integer data (indices, lengths, offsets): random values are no valid
            # data for it, and the kernel runs without it
            args.append(arg | {"null": True, "shape": [8]})
            guessed.append(f"{name}: null (optional integer data, as indices or lengths, "
                           "that kport cannot invent: the oracle checks the port without it; "
                           f"the package's run() takes {name}=None or an array)")
            continue
        arg["shape"] = (shapes or {}).get(name)
        if arg["shape"] is None:
            arg["shape"] = [elements]
            flat.append(name)
        args.append(arg)
    if block is None:
        block = [256, 1, 1]
        guessed.append("CUDA block [256, 1, 1] (no --block given)")
    if grid is None:
        grid = [f"ceil_div({elements}, {block[0]})", 1, 1]
        guessed.append(f"CUDA grid {grid}: one thread per element (no --grid given)")
        if not _FLAT_INDEX.search(src):
            # a block per row, a warp per row (llama.cpp's fwht, vLLM's rms_norm): one thread
            # per element is not the kernel's launch, and what it measures would be wrong
            raise KportError(_no_guess(
                src_path, kernel, view, sizes, constants, why="the kernel computes no flat "
                "thread index (blockIdx.x * blockDim.x + threadIdx.x), so one thread per "
                "element is no launch kport may guess for it"))
        if math.prod(sizes.values()) > MAX_GUESSED_THREADS:
            raise KportError(_no_guess(
                src_path, kernel, view, sizes, constants, why="one thread per element of the "
                f"product of the sizes would be {math.prod(sizes.values()):,} threads"))
    if shared_mem is None and "KP_SMEM_BYTES" in tr.template:
        guessed.append("dynamic shared memory 0 bytes: the kernel declares extern __shared__, "
                       "so pass --shared-mem BYTES with what the host launch gives")
    if flat:
        _contiguous_strides(src, kernel, source, args, sizes, (grid, block, shared_mem),
                            guessed)
    relations = size_contracts(src, kernel, args, sizes, (grid, block, shared_mem),
                               tr.template, guessed)
    fixed, constraints = False, [r.text() for r in relations.stated().relations]
    if flat:
        fixed, constraints = _measure_shapes(src, kernel, source, args, flat, sizes,
                                             (grid, block, shared_mem), guessed, relations)
        unrun = next((g for g in guessed if "the kernel did not run in cuda_sim" in g), None)
        if unrun and all(a.get("shape_guessed") for a in args if a["name"] in flat) and \
                math.prod(sizes.values()) > MAX_GUESSED_THREADS:
            # no array could be measured and the flat guesses are too large to run the oracle
            # on: say why the kernel does not run, rather than the flat guesses' size
            raise KportError(f"{src_path}: {kernel}: the CUDA kernel does not run in cuda_sim "
                             f"at the sizes given, so kport cannot measure its arrays: "
                             f"{unrun.partition('not measured: ')[2].split('; pass --shape')[0]} "
                             "(pass --shape for each array, or --grid/--block if the launch "
                             "was guessed)")
    variant = variant_sizes(sizes, relations)
    if fixed:
        variant = {}
        guessed.append("no second size set: a shape was measured at these sizes only")
    if variant:
        guessed.append(f"a second size set {variant} (odd sizes, to exercise tails, the "
                       "size relations kept)")
    half = any(a["dtype"] in ("float16", "bfloat16") for a in args)
    category = _category(tr.kernel)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / source).write_text(src)
    data = {"id": folder.name, "title": f"{tr.kernel} (case guessed by kport port)",
            "category": category,
            "notes": "Guessed by `kport port` without --case: check every shape, scalar value "
                     "and the launch, then run `kport port ... --case " + folder.name + "/"
                     + GUESSED + "`.",
            "cuda": {"source": source, "kernel": kernel, "grid": list(grid),
                     "block": list(block), "shared_mem": shared_mem or 0},
            "sizes": dict(sizes), "variants": [variant] if variant else [], "args": args,
            "check": {"rtol": 1e-2 if half else 1e-5, "atol": 1e-3 if half else 1e-6,
                      "reference": "cuda", "seeds": 2}}
    if not variant:
        del data["variants"]
    sets = [sizes, {**sizes, **variant}]
    constraints = [c for c in constraints if all(evaluate(c, s) for s in sets)]
    if constraints:  # the judge's held-out sizes keep them too
        data["check"]["constraints"] = constraints
        guessed.append(f"check.constraints {constraints}: the measured shapes rely on them")
    (folder / "case.toml").write_text(case_toml(data))
    guessed.append(f"tolerances rtol={data['check']['rtol']} atol={data['check']['atol']}")
    return load_case(folder), guessed


# a flat thread index (`blockIdx.x * blockDim.x + threadIdx.x`, grid-stride loops): a kernel
# one thread per element can launch
_FLAT_INDEX = re.compile(r"\bblockIdx\.x\b[^;{}]{0,40}\bblockDim\.x\b|"
                         r"\bblockDim\.x\b[^;{}]{0,40}\bblockIdx\.x\b")
# a guessed launch (one thread per element of the product of the sizes) larger than this is
# no guess worth running: the user is asked for the launch instead
MAX_GUESSED_THREADS = 1 << 24


def _no_guess(src_path: Path, kernel: str, view, sizes: dict, constants, why: str) -> str:
    """Why kport guesses no launch (one thread per element) for ``kernel``: ``why``, then the
    problems of the host launch it could not read, and what to pass."""
    _, given = template_parts(kernel)
    launches = [x for x in find_launches(view.text, kernel, given, sizes, constants)
                if matches(x, given)]
    launch = (f"the host launch in {launches[0].host} at {view.where(launches[0].line)} could "
              f"not be read: {'; '.join(launches[0].problems) or 'it uses names no --size gives'}"
              if launches else "the file has no host launch of it kport can find")
    return (f"{src_path}: {kernel}: {why}; {launch}; pass --grid/--block as the host launches "
            "it, or --size for the names its launch uses")


def _fills(view, kernel: str, launch) -> dict[int, float | None]:
    """What the host fills each output argument with before launching ``kernel`` (by index):
    the launch the case uses, or else the first of this instantiation (--grid given)."""
    if launch is None:
        _, given = template_parts(kernel)
        launch = next((x for x in find_launches(view.text, kernel, given) if matches(x, given)),
                      None)
    return output_fills(view.text, launch.line, launch.arg_texts) if launch is not None else {}


def _fill_init(name: str, fill: float | None, guessed: list[str]) -> str:
    """The case's init of an output the host fills before the launch (agent/host_init.py)."""
    if fill is None:
        guessed.append(f"{name}: the host leaves it uninitialised (torch::empty): the kernel "
                       "must write all of it")
        return "zeros"
    guessed.append(f"{name}: starts as {fill:g}, as the host fills it before the launch (the "
                   f"port's outputs start so too: MLX init_value)")
    return "zeros" if fill == 0 else "ones" if fill == 1 else f"full:{fill:g}"


def _passed(launch, index: int) -> str:
    """The text the host launch passes as the kernel's argument ``index`` ("" without one)."""
    texts = launch.arg_texts if launch is not None else []
    return texts[index].strip() if index < len(texts) else ""


def resolve_kernel(src: str, kernel: str, where: str) -> tuple[str, list[str]]:
    """(``kernel`` with a value for every template parameter, what was picked): template
    arguments the user left out come from the first instantiation the host code launches
    that agrees with those given (a host function's own type parameter becomes float). A
    KportError lists the launched instantiations when none gives every value."""
    name, given = template_parts(kernel)
    params = template_params(src, name)
    need = max((i + 1 for i, (_, _, default) in enumerate(params or []) if default is None),
               default=0)
    if params is None or len(given) >= need:
        return kernel, []
    launches = find_launches(src, name)
    launched = instantiations(src, name, launches)
    for launch in launches:
        if launch.template_args is None or not matches(launch, given):
            continue
        args = list(given)
        for i in range(len(given), need):
            value = launch.template_args[i] if i < len(launch.template_args) else None
            args.append(value if value is not None else "float" if params[i][1] else None)
        if None not in args:
            picked = f"{name}<{', '.join(args)}>"
            return picked, [f"template arguments {picked} from the host launch in "
                            f"{launch.host} at line {launch.line} (launched there: "
                            f"{'; '.join(launched)})"]
    missing = ", ".join(p for p, _, _ in params[len(given):need])
    raise KportError(f"{where}: template parameter(s) {missing} of {name} have no value"
                     + (f"; the host code launches {'; '.join(launched)}" if launched else "")
                     + f"; name the instantiation, e.g. --kernel '{name}<"
                     + ", ".join(p for p, _, _ in params[:need]) + ">' with values")


def _host_launch(view, kernel: str, params: list[str], ints: list[str], sizes: dict,
                 config: bool = True, constants=None):
    """(the first launch of ``kernel`` in the file's host code that sizes can express, the
    kernel's int scalars as expressions over its sizes) or (None, {}): agent/host_launch.py.
    With --size given, only a launch over those names (or some of them: the others may size a
    struct field or a scalar). Only launches of ``kernel``'s
    instantiation count (``norm_f32<1024>`` is launched with other blocks than ``<32>``).
    ``config=False``: the grid and block are typed, so any launch of it gives the scalars.
    ``constants``: the compiler of the host's constants (agent/host_consts.py)."""
    _, given = template_parts(kernel)
    for launch in find_launches(view.text, kernel, given, sizes, constants):
        if not matches(launch, given) or (config and not launch.usable):
            continue
        used = size_names([*launch.grid, *launch.block, str(launch.shared_mem)]) \
            if config else list(sizes)
        if not used or (sizes and not set(used) <= set(sizes)):
            continue
        # a kernel scalar the launch passes as an expression over the sizes takes it; one it
        # passes otherwise (a value such as an enum, an expression kport cannot read) is not
        # bound to a size of the same name (llama.cpp's tri passes nb01 / sizeof(T) as nb01)
        values, unread = {}, set()
        for name, expr in zip(params, launch.args, strict=False):
            if name not in ints or (not config and name in sizes):
                continue  # typed launch: a size named after the kernel's scalar gives it
            if not config and (expr is None or not set(size_names([expr])) <= set(sizes)):
                continue
            if expr is not None and (not sizes or set(size_names([expr])) <= set(sizes)):
                values[name] = expr
            elif expr is None or expr.strip() != name:
                unread.add(name)
        return launch, values, unread
    return None, {}, set()


def _struct_arg(name: str, ctype: str, fields: list[dict], sizes: dict,
                guessed: list[str], parts: list[str] | None = None) -> dict:
    """The case argument of a struct parameter: its bytes, each field's value the size of its
    name or a guess (listed). ``parts``: a CUDA vector's components as the host launch
    computes them (size expressions), used when they name only the given sizes."""
    if parts and set(size_names(parts)) <= set(sizes):
        fields = [f | {"value": v} for f, v in zip(fields, parts, strict=True)]
        guessed.append(f"{name} ({ctype}): ({', '.join(parts)}), as the host launch computes "
                       "it; run() computes it from the sizes when not given")
        return {"name": name, "role": "in", "dtype": "uint8", "shape": [buffer_size(fields)],
                "ctype": ctype, "fields": fields}

    def valued(fields: list[dict], path: str) -> list[dict]:
        out = []
        for f in fields:
            f = dict(f)
            if f.get("fields"):
                f["fields"] = valued(f["fields"], f"{path}{f['name']}.")
            elif f["dtype"] == "pointer":  # its array is an argument of its own (`field`)
                f.pop("pointee", None)
            else:
                one = f["name"] if f["name"] in sizes else (
                    1 if f["dtype"].startswith(("int", "uint")) else
                    True if f["dtype"] == "bool" else 1.0)
                f["value"] = [one] * f["count"] if f.get("count", 1) > 1 else one
                if f["name"] not in sizes:
                    guessed.append(f"struct field {name}.{path}{f['name']} = {f['value']}")
            out.append(f)
        return out

    fields = valued(fields, "")
    nbytes = buffer_size(fields)
    guessed.append(f"struct parameter {name} ({ctype}): its {nbytes} bytes as a uint8 input, "
                   "read back as the struct in the port; run() takes a dict of its fields")
    return {"name": name, "role": "in", "dtype": "uint8", "shape": [nbytes], "ctype": ctype,
            "fields": fields}


def _launch_dims(launch: tuple):
    """(grid, block, dynamic shared bytes) of a size set, from the case's expressions."""
    grid, block, smem = launch

    def dims(sz: dict) -> tuple[list, list, int]:
        return ([int(evaluate(str(g), sz)) for g in grid], [int(evaluate(str(b), sz))
                                                            for b in block],
                int(evaluate(str(smem or 0), sz)))
    return dims


def _contiguous_strides(src: str, kernel: str, filename: str, args: list[dict], sizes: dict,
                        launch: tuple, guessed: list[str]) -> None:
    """A struct's stride fields that kport guessed (1: every array's rows overlap) set to the
    contiguous strides the kernel's indexing measures (agent/stride_probe.py)."""
    for struct, values in measure_strides(src, kernel, filename, args, sizes,
                                          _launch_dims(launch)).items():
        arg = next(a for a in args if a["name"] == struct)
        for f in arg["fields"]:
            if f["name"] in values and f["name"] not in sizes:
                f["value"] = values[f["name"]]
                guessed[:] = [g for g in guessed
                              if not g.startswith(f"struct field {struct}.{f['name']} = ")]
                guessed.append(f"struct field {struct}.{f['name']} = {f['value']}: a "
                               "contiguous stride, from how far the kernel indexes that "
                               "dimension in cuda_sim")


def _measure_shapes(src: str, kernel: str, filename: str, args: list[dict], flat: list[str],
                    sizes: dict, launch: tuple, guessed: list[str],
                    relations: SizeRelations) -> tuple[bool, list[str]]:
    """Replace the flat shape of each argument in ``flat`` by the extent the kernel accesses
    it at, measured in cuda_sim and fitted over the sizes (agent/shape_probe.py) at size sets
    that keep ``relations``; (True when a shape holds only at these sizes, the relations the
    shapes rely on)."""
    dims = _launch_dims(launch)
    probe = probe_shapes(src, kernel, filename,
                         [ArgProbe(a["name"], a["role"], a["dtype"], a.get("value"),
                                   a.get("fields"), a.get("null", False), a.get("field", ""),
                                   offsets=a.get("init", "").partition("offsets:")[2])
                          for a in args],
                         dict(sizes), dims, relations)
    for a in args:
        if a["name"] not in flat:
            continue
        if a["name"] in probe.shapes:
            a["shape"] = [probe.shapes[a["name"]]]
            guessed.append(f"shape of {a['name']}: [{probe.shapes[a['name']]}], measured in "
                           "cuda_sim (the elements the kernel accesses, fitted over the sizes)")
        elif probe.base.get(a["name"]):
            # no expression explains it: the extent measured at these sizes, valid at these
            # sizes only (the caller drops the second size set)
            a["shape"], a["shape_guessed"] = [probe.base[a["name"]]], True
            guessed.append(f"shape of {a['name']}: [{probe.base[a['name']]}], the extent "
                           "measured at these sizes only (no expression over the sizes "
                           f"fits: {probe.unfitted.get(a['name'])}; pass --shape "
                           f"{a['name']}=...)")
        else:
            a["shape_guessed"] = True
            guessed.append(f"shape of {a['name']}: {a['shape']} (flat; not measured: "
                           f"{probe.unfitted.get(a['name'], 'no access')}; pass --shape "
                           f"{a['name']}=...)")
    return any(a.get("shape_guessed") and isinstance(a["shape"][0], int)
               for a in args), probe.relations


def _category(kernel: str) -> str:
    cat = guess_category(kernel)
    return cat if cat in CATEGORIES else "other"


def load_case_arg(path: Path, scratch: Path):
    """The case a --case argument names: a case folder or its case.toml (loaded where it is),
    or another TOML file such as a package's case.guessed.toml, or a folder holding only that
    (loaded from a copy of its folder under ``scratch`` with the file as case.toml, since
    corpus.cases.load_case reads FOLDER/case.toml). Raises CaseError naming the user's file."""
    path = Path(path).expanduser()
    if path.name == "case.toml" or (path.is_dir() and (path / "case.toml").is_file()):
        return load_case(path.parent if path.name == "case.toml" else path)
    toml = path if path.is_file() else path / GUESSED
    if not toml.is_file():
        return load_case(path)  # its CaseError says that there is no case here
    folder = toml.parent
    copy = Path(scratch) / folder.resolve().name
    shutil.rmtree(copy, ignore_errors=True)
    # links stay links, so that load_case refuses them as it would in the user's folder
    shutil.copytree(folder, copy, symlinks=True,
                    ignore=shutil.ignore_patterns(*_PACKAGE_FILES, "case.toml"))
    shutil.copyfile(toml, copy / "case.toml")
    try:
        return load_case(copy)
    except CaseError as err:
        raise CaseError(str(err).replace(str(copy / "case.toml"), str(toml))
                        .replace(str(copy), str(folder))) from None


def with_sizes(case, sizes: dict[str, int]):
    """``case`` with its default sizes overridden (variants kept); KportError for a size the
    case does not have."""
    unknown = sorted(set(sizes) - set(case.sizes))
    if unknown:
        raise KportError(f"--size {unknown[0]}: the case has no size of that name; its sizes: "
                         f"{', '.join(case.sizes)}")
    return case.model_copy(update={"sizes": {**case.sizes, **sizes}}) if sizes else case


def total_bytes(case, sizes: dict[str, int]) -> int:
    """Bytes of every array argument at ``sizes`` (to pick small oracle size sets)."""
    return sum(math.prod(int(evaluate(s, sizes)) for s in a.shape) for a in case.args
               if a.role != "scalar") * 4
