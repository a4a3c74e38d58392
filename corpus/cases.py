"""The corpus case format: ``corpus/cases/<NNN>_<name>/case.toml`` loaded into a validated model.

The format is a contract (the corpus issue); docs/corpus.md describes every key. Sizes are
named symbols; grids, shapes, values and template ints may be expressions over them
("rows*256", "(n + 255) // 256"), evaluated by a small whitelist evaluator, never eval().
"""

from __future__ import annotations

import math
import random
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from runners import limits, sizeexpr, structs
from runners.dtypes import DTYPES, known_dtype
from runners.errors import KportError

CATEGORIES = {"elementwise", "reduction", "scan", "norm", "gemm", "gemv", "attention", "ssm",
              "conv", "sort", "atomic", "quant", "training", "transpose", "softmax", "rope",
              "gather", "loss", "other"}
Expr = int | str
# Sizes are C ints in the kernels; the arguments of one size set may take this many bytes.
MAX_SIZE = 2**31 - 1
CASE_MAX_BYTES = 2 << 30
# The loosest tolerances a case may set: looser ones accept wrong ports.
MAX_RTOL, MAX_ATOL = 0.5, 1.0


class CaseError(KportError):
    """A case folder or case.toml is wrong; the message names the file, key and fix."""


class CudaSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str
    kernel: str
    grid: list[Expr] = Field(min_length=1, max_length=3)
    block: list[Expr] = Field(min_length=1, max_length=3)
    shared_mem: Expr = 0


class MetalSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str
    header: str = ""
    inputs: list[str]
    outputs: list[str] = Field(min_length=1)
    grid: list[Expr] = Field(min_length=1, max_length=3)
    threadgroup: list[Expr] = Field(min_length=1, max_length=3)
    template: dict[str, int | bool | str] = Field(default_factory=dict)
    init_value: float | None = None
    atomic_outputs: bool = False
    # an input or output whose name Metal cannot take (`kernel`, an MSL keyword) -> the name
    # the port's source gives it (what metal_kernel's input_names/output_names say)
    names: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _renamed_arguments(self) -> MetalSpec:
        for name, metal in self.names.items():
            if name not in (*self.inputs, *self.outputs):
                raise ValueError(f"names: {name!r} is no input or output of [metal]")
            if not metal.isidentifier():
                raise ValueError(f"names.{name}: {metal!r} is not an identifier")
        return self


class FieldSpec(BaseModel):
    """One field of a struct parameter (runners/structs.py): a scalar or fixed array with its
    value (a size expression or number; a list for an array), a nested struct, or a pointer
    (dtype "pointer", no value: the array it points at is the argument whose `field` names it,
    or nullptr when none does)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    dtype: str = ""
    count: int = Field(default=1, ge=1, le=4096)
    value: Expr | float | list[Expr | float] | None = None
    fields: list[FieldSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _complete(self) -> FieldSpec:
        if self.fields:
            if self.dtype or self.value is not None:
                raise ValueError(f"field {self.name!r}: a nested struct has `fields`, not "
                                 "`dtype` or `value`")
            return self
        if self.dtype == "pointer":
            if self.value is not None or self.count != 1:
                raise ValueError(f"field {self.name!r}: a pointer field has no `value` or "
                                 "`count` (its array is the argument whose `field` names it)")
            return self
        known_dtype(self.dtype)
        if self.value is None:
            raise ValueError(f"field {self.name!r} needs `value`")
        n = len(self.value) if isinstance(self.value, list) else 1
        if n != self.count:
            raise ValueError(f"field {self.name!r}: `count` {self.count} but {n} value(s)")
        return self


class ArgSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    role: Literal["in", "out", "inout", "scalar"]
    dtype: str
    shape: list[Expr] = Field(default_factory=list)
    init: str = "zeros"
    value: Expr | float | None = None
    # a struct passed by value: its fields; the argument is then an "in" uint8 array of the
    # struct's bytes (shape: their count), which the port reads back as the struct
    ctype: str = ""
    fields: list[FieldSpec] = Field(default_factory=list)
    # an input pointer passed as nullptr (CUDA) / absent (the port's KP_HAS_<name> is false)
    null: bool = False
    # the array a struct argument's pointer field points at: "STRUCT.FIELD" ("params.x_ptr")
    field: str = ""
    # a scalar whose `value` is its C++ default value: the package's run() may omit it
    default: bool = False
    # the shape is kport's flat guess, not measured (docs/corpus.md): big enough for the
    # oracle's inputs, but a package does not hold a caller's array to it
    shape_guessed: bool = False

    _dtype = field_validator("dtype")(lambda v: known_dtype(v))

    @field_validator("init")
    @classmethod
    def _known_init(cls, v: str) -> str:
        if not re.fullmatch(r"normal|uniform|zeros|ones|arange|randint:-?\d+:-?\d+|"
                            r"uniform:-?[\d.]+:-?[\d.]+|normal:[\d.]+|full:-?[\d.]+|"
                            r"offsets:[\w ()*+/%-]+", v):
            raise ValueError(f"unknown init {v!r}; one of normal, normal:SCALE, uniform, "
                             "uniform:LO:HI, randint:LO:HI, zeros, ones, full:V, arange, "
                             "offsets:END")
        kind, *bounds = v.split(":")
        if kind in ("uniform", "randint") and bounds and not float(bounds[0]) < float(bounds[1]):
            raise ValueError(f"init {v!r}: LO must be below HI")
        return v

    @model_validator(mode="after")
    def _null_is_an_input(self) -> ArgSpec:
        if self.null and (self.role != "in" or self.fields):
            raise ValueError(f"argument {self.name!r}: only an `in` pointer may be null")
        return self

    @model_validator(mode="after")
    def _struct_is_its_bytes(self) -> ArgSpec:
        if not self.fields:
            return self
        size = structs.buffer_size(self.layout())
        if self.role != "in" or self.dtype != "uint8" or self.shape not in ([size], [str(size)]):
            raise ValueError(f"struct argument {self.name!r}: role \"in\", dtype \"uint8\" "
                             f"and shape [{size}] (its bytes), got role {self.role!r}, dtype "
                             f"{self.dtype!r}, shape {self.shape}")
        return self

    def layout(self) -> list[dict]:
        """The struct's fields as runners/structs.py takes them."""
        return [f.model_dump(exclude_defaults=True) for f in self.fields]

    @model_validator(mode="after")
    def _scalar_has_value(self) -> ArgSpec:
        if self.role == "scalar" and self.value is None:
            raise ValueError(f"scalar argument {self.name!r} needs `value`")
        if self.role != "scalar" and not self.shape:
            raise ValueError(f"array argument {self.name!r} needs `shape`")
        if self.init.startswith("randint:") and self.dtype in DTYPES and \
                DTYPES[self.dtype][0][0] in "iu":
            info = np.iinfo(DTYPES[self.dtype][0])
            lo, hi = (int(b) for b in self.init.split(":")[1:])
            if lo < info.min or hi - 1 > info.max:
                raise ValueError(f"init {self.init!r} does not fit {self.dtype} "
                                 f"({info.min} to {info.max})")
        return self


class CheckSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rtol: float = 1e-5
    atol: float = 1e-6
    reference: str = "cuda"
    seeds: int = Field(default=2, ge=1, le=10)
    # conditions over the sizes every size set meets, e.g. "q_heads % kv_heads == 0"; the
    # harness's held-out sizes are drawn to meet them too
    constraints: list[str] = Field(default_factory=list)

    @field_validator("rtol", "atol", mode="before")
    @classmethod
    def _tolerance(cls, v, info):
        # inf accepts every wrong port, a negative one rejects every honest one
        most = MAX_RTOL if info.field_name == "rtol" else MAX_ATOL
        try:
            return limits.check_tolerance(v, "the value", most)
        except limits.InputError as err:
            raise ValueError(str(err)) from None

    @field_validator("reference")
    @classmethod
    def _reference_form(cls, v: str) -> str:
        if v != "cuda" and not re.fullmatch(r"[\w./-]+\.py:\w+", v):
            raise ValueError("reference must be \"cuda\" or \"FILE.py:function\"")
        return v


class CaseSpec(BaseModel):
    """One corpus case. ``folder`` is where case.toml lives; file keys are relative to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    title: str
    category: str
    cuda: CudaSpec
    sizes: dict[str, int]
    variants: list[dict[str, int]] = Field(default_factory=list)
    args: list[ArgSpec] = Field(min_length=1)
    check: CheckSpec = CheckSpec()
    metal: MetalSpec | None = None
    notes: str = ""
    folder: Path = Path(".")
    # whether the case came with kport (set by load_case, kept by copies; never from TOML):
    # only a bundled case's Python reference runs outside the jail
    _bundled: bool = PrivateAttr(default=False)

    @property
    def bundled(self) -> bool:
        return self._bundled

    @field_validator("category")
    @classmethod
    def _known_category(cls, v: str) -> str:
        if v not in CATEGORIES:
            raise ValueError(f"unknown category {v!r}; one of {', '.join(sorted(CATEGORIES))}")
        return v

    @field_validator("sizes", "variants", mode="after")
    @classmethod
    def _sizes_in_range(cls, v):
        for sizes in v if isinstance(v, list) else [v]:
            for name, value in sizes.items():
                if not name.isidentifier():
                    raise ValueError(f"size name {name!r} must be an identifier")
                if not 1 <= value <= MAX_SIZE:
                    raise ValueError(f"size {name} = {value}: sizes are from 1 to {MAX_SIZE}")
        return v

    @model_validator(mode="after")
    def _names_line_up(self) -> CaseSpec:
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            raise ValueError("argument names must be unique")
        if self.metal:
            arrays = {a.name for a in self.args if a.role != "scalar"}
            for name in self.metal.inputs:
                if name not in names:
                    raise ValueError(f"metal.inputs: {name!r} is not an argument")
            for name in self.metal.outputs:
                base = name.removesuffix("_out")
                if name not in arrays and base not in arrays:
                    raise ValueError(f"metal.outputs: {name!r} names no array argument "
                                     "(an inout argument X is returned as X_out)")
        by_name = {a.name: a for a in self.args}
        pointed = [a.field for a in self.args if a.field]
        if len(set(pointed)) != len(pointed):
            raise ValueError("two arguments name the same struct pointer field")
        for arg in self.args:
            if not arg.field:
                continue
            struct, _, path = arg.field.partition(".")
            owner = by_name.get(struct)
            if owner is None or not owner.fields or arg.role == "scalar" or not any(
                    f.name == path and f.dtype == "pointer" for f in owner.fields):
                raise ValueError(f"args.{arg.name}.field: {arg.field!r} names no pointer "
                                 "field of a struct argument (STRUCT.FIELD, a field of dtype "
                                 "\"pointer\")")
        for variant in self.variants:
            unknown = set(variant) - set(self.sizes)
            if unknown:
                raise ValueError(f"variants: unknown size {sorted(unknown)[0]!r}")
        for sizes in self.size_sets():
            for condition in self.check.constraints:
                if not holds(condition, sizes, "check.constraints"):
                    raise ValueError(f"check.constraints: {condition!r} does not hold for the "
                                     f"size set {sizes}")
            try:
                self.check_sizes(sizes)
            except CaseError as err:
                raise ValueError(str(err)) from None
        return self

    def check_sizes(self, sizes: dict[str, int]) -> None:
        """Every value the case derives from ``sizes`` in range, before anything is allocated
        or launched: shapes, bytes, scalars, launches (CUDA's and Metal's limits), template
        ints. CaseError names the key and the size set."""
        at = f" at sizes {sizes}"  # a whole-number check's message ends with it
        nbytes = 0
        for arg in self.args:
            key = f"args.{arg.name}"
            if arg.role == "scalar":
                value = evaluate(arg.value, sizes, key + ".value")
                kind = np.dtype(DTYPES[arg.dtype][0]).kind
                if kind in "iu" and arg.dtype != "bfloat16":
                    info = np.iinfo(DTYPES[arg.dtype][0])
                    if not isinstance(value, (int, bool)) or not info.min <= value <= info.max:
                        raise CaseError(f"{key}.value: {value!r}{at} is not a {arg.dtype} "
                                        f"({info.min} to {info.max})")
                continue
            dims = [evaluate(d, sizes, key + ".shape") for d in arg.shape]
            if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
                raise CaseError(f"{key}.shape: {arg.shape} gives {dims}{at}; every dimension "
                                "must be a positive integer")
            nbytes += math.prod(dims) * np.dtype(DTYPES[arg.dtype][0]).itemsize
        if nbytes > CASE_MAX_BYTES:
            raise CaseError(f"args: the arrays need {limits.human_bytes(nbytes)}{at}, over "
                            f"the {limits.human_bytes(CASE_MAX_BYTES)} a case may use; use "
                            "smaller sizes")

        def dims(exprs, key):
            return [_int(evaluate(e, sizes, key), key, at) for e in exprs]

        try:
            limits.check_cuda_launch(dims(self.cuda.grid, "cuda.grid"),
                                     dims(self.cuda.block, "cuda.block"),
                                     f"cuda.grid/block{at}",
                                     _int(evaluate(self.cuda.shared_mem, sizes,
                                                   "cuda.shared_mem"), "cuda.shared_mem", at))
            if self.metal:
                limits.check_metal_launch(dims(self.metal.grid, "metal.grid"),
                                          dims(self.metal.threadgroup, "metal.threadgroup"),
                                          f"metal.grid/threadgroup{at}")
                for name, value in self.metal.template.items():
                    if isinstance(value, str) and value not in DTYPES:
                        _int(evaluate(value, sizes, f"metal.template.{name}"),
                             f"metal.template.{name}", at)
        except limits.InputError as err:
            raise CaseError(str(err)) from None

    def size_sets(self) -> list[dict[str, int]]:
        """The default sizes, then each variant over them."""
        return [dict(self.sizes)] + [{**self.sizes, **v} for v in self.variants]

    def held_out_sizes(self, rng: random.Random) -> dict[str, int] | None:
        """A size set the case does not list, drawn from ``rng`` within its constraints: each
        size its size sets vary is drawn between their smallest and largest value, in steps of
        their greatest common divisor; the others keep their default; ``check.constraints``
        must hold. None when no size varies or no draw of 200 meets the constraints."""
        sets = self.size_sets()
        varying = {k: sorted({s[k] for s in sets}) for k in self.sizes}
        varying = {k: v for k, v in varying.items() if len(v) > 1}
        listed = [sorted(s.items()) for s in sets]
        for _ in range(200 if varying else 0):
            draw = dict(self.sizes)
            for name, values in varying.items():
                draw[name] = rng.randrange(values[0], values[-1] + 1, math.gcd(*values))
            if sorted(draw.items()) not in listed and all(
                    holds(c, draw, "check.constraints") for c in self.check.constraints) and \
                    self._fits(draw):
                return draw
        return None

    def _fits(self, sizes: dict[str, int]) -> bool:
        try:
            self.check_sizes(sizes)
        except CaseError:
            return False
        return True


def _int(value, key: str, at: str) -> int:
    """A launch value must be a whole number (5.0 is 5; 2.5 is an error)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise CaseError(f"{key}: {value!r}{at} is not a whole number")
    return int(value)


def evaluate(expr: Expr | float, sizes: dict[str, int], where: str = "") -> int | float:
    """Value of an int/float or an expression over the size symbols (runners/sizeexpr.py);
    CaseError otherwise, including division by zero, a non-finite or over-2**64 value and an
    expression too costly to evaluate."""
    try:
        return sizeexpr.evaluate(expr, sizes, where)
    except sizeexpr.SizeExprError as err:
        raise CaseError(str(err)) from None


def holds(condition: str, sizes: dict[str, int], where: str = "") -> bool:
    """Whether ``condition`` (an expression over the sizes) is true for ``sizes``."""
    return bool(evaluate(condition, sizes, where))


def load_case(folder: Path) -> CaseSpec:
    """Load and validate ``folder/case.toml``; CaseError names the file, key and why."""
    path = Path(folder) / "case.toml"
    if not path.is_file():
        raise CaseError(f"{path}: no case.toml in this folder")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise CaseError(f"{path}: not valid TOML: {err}") from None
    if "folder" in data:
        raise CaseError(f"{path}: key `folder` is not a case key (a case is its folder); "
                        "remove it")
    try:
        case = CaseSpec(**data, folder=path.parent)
    except ValidationError as err:
        problems = [_problem(e) for e in err.errors()[:3]]
        raise CaseError(f"{path}: " + "; ".join(problems)) from None
    if case.id != path.parent.name:
        raise CaseError(f"{path}: key `id`: {case.id!r} must equal the folder name "
                        f"{path.parent.name!r}")
    for item in path.parent.rglob("*"):
        if item.is_symlink():  # would make the case read whatever file of this machine it names
            raise CaseError(f"{item}: a link in the case folder; a case folder holds its files "
                            "themselves (replace the link by the file)")
    files = [("cuda.source", case.cuda.source)]
    if case.metal:
        files += [("metal.source", case.metal.source)] + (
            [("metal.header", case.metal.header)] if case.metal.header else [])
    if case.check.reference != "cuda":
        files.append(("check.reference", case.check.reference.split(":")[0]))
    inside = path.parent.resolve()
    for key, rel in files:
        target = path.parent / rel
        # a case folder is outside code: its keys may not point at other files of the machine
        if Path(rel).is_absolute() or not target.resolve().is_relative_to(inside):
            raise CaseError(f"{path}: key `{key}`: {rel!r} leads outside the case folder; name "
                            "a file inside it")
        if not target.is_file():
            raise CaseError(f"{path}: key `{key}`: file {rel!r} not found in the case folder")
    case._bundled = inside.is_relative_to(corpus_dir().resolve())
    return case


def _problem(error: dict) -> str:
    """One pydantic error as "key `a.b`: why" (a whole-case check names its key itself)."""
    msg = error["msg"].removeprefix("Value error, ")
    key = ".".join(str(p) for p in error["loc"])
    return f"key `{key}`: {msg}" if key else msg


def corpus_dir() -> Path:
    """The bundled corpus: the ``cases`` folder this package ships (package data, so a
    non-editable install finds it too)."""
    return Path(str(resources.files("corpus") / "cases"))


def discover(root: Path | None = None, ids: list[str] | None = None) -> list[CaseSpec]:
    """Cases under ``root`` (default: the bundled corpus), optionally only ``ids`` (exact ids
    or unique prefixes such as "012"); CaseError for an id that matches nothing."""
    root = root or corpus_dir()
    if not root.is_dir():
        raise CaseError(f"{root}: no such folder; name a folder of case folders")
    folders = sorted(p for p in root.iterdir() if (p / "case.toml").is_file())
    if not folders:
        raise CaseError(f"{root}: no case folders (each with a case.toml) in it")
    if ids:
        chosen = []
        for want in ids:
            hits = [f for f in folders if f.name == want or f.name.startswith(want + "_")
                    or f.name.split("_", 1)[0] == want]
            if not hits:
                raise CaseError(f"no case {want!r} under {root}; `kport corpus list` shows them")
            chosen += hits
        folders = chosen
    return [load_case(f) for f in folders]
