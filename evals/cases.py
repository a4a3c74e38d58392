"""The corpus case format: ``corpus/cases/<NNN>_<name>/case.toml`` loaded into a validated model.

The format is a contract (the corpus issue); docs/corpus.md describes every key. Sizes are
named symbols; grids, shapes, values and template ints may be expressions over them
("rows*256", "(n + 255) // 256"), evaluated by a small whitelist evaluator, never eval().
"""

from __future__ import annotations

import ast
import math
import operator
import random
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from runners.dtypes import known_dtype
from runners.errors import KportError

CATEGORIES = {"elementwise", "reduction", "scan", "norm", "gemm", "gemv", "attention", "ssm",
              "conv", "sort", "atomic", "quant", "training", "transpose", "softmax", "rope",
              "gather", "loss", "other"}
Expr = int | str


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


class ArgSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    role: Literal["in", "out", "inout", "scalar"]
    dtype: str
    shape: list[Expr] = Field(default_factory=list)
    init: str = "zeros"
    value: Expr | float | None = None

    _dtype = field_validator("dtype")(lambda v: known_dtype(v))

    @field_validator("init")
    @classmethod
    def _known_init(cls, v: str) -> str:
        if not re.fullmatch(r"normal|uniform|zeros|ones|arange|randint:-?\d+:-?\d+|"
                            r"uniform:-?[\d.]+:-?[\d.]+|normal:[\d.]+", v):
            raise ValueError(f"unknown init {v!r}; one of normal, normal:SCALE, uniform, "
                             "uniform:LO:HI, randint:LO:HI, zeros, ones, arange")
        return v

    @model_validator(mode="after")
    def _scalar_has_value(self) -> ArgSpec:
        if self.role == "scalar" and self.value is None:
            raise ValueError(f"scalar argument {self.name!r} needs `value`")
        if self.role != "scalar" and not self.shape:
            raise ValueError(f"array argument {self.name!r} needs `shape`")
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
        for variant in self.variants:
            unknown = set(variant) - set(self.sizes)
            if unknown:
                raise ValueError(f"variants: unknown size {sorted(unknown)[0]!r}")
        for sizes in self.size_sets():
            for condition in self.check.constraints:
                if not holds(condition, sizes, "check.constraints"):
                    raise ValueError(f"check.constraints: {condition!r} does not hold for the "
                                     f"size set {sizes}")
        return self

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
                    holds(c, draw, "check.constraints") for c in self.check.constraints):
                return draw
        return None


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
        ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_FUNCS = {"min": min, "max": max, "ceil_div": lambda a, b: -(-a // b)}


def evaluate(expr: Expr | float, sizes: dict[str, int], where: str = "") -> int | float:
    """Value of an int/float or an expression over the size symbols; CaseError otherwise."""
    if isinstance(expr, (int, float)):
        return expr

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name) and node.id in sizes:
            return sizes[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in _FUNCS and not node.keywords:
            return _FUNCS[node.func.id](*[walk(a) for a in node.args])
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            left, ok = walk(node.left), True
            for op, right in zip(node.ops, node.comparators, strict=True):
                value = walk(right)
                ok, left = ok and _COMPARE[type(op)](left, value), value
            return ok
        if isinstance(node, ast.BoolOp):
            values = [walk(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not walk(node.operand)
        raise CaseError(f"{where}: cannot evaluate {expr!r}: use numbers, size names "
                        f"({', '.join(sizes)}), + - * // % / ** << >> & | ^, min, max, "
                        "ceil_div, comparisons, and/or/not")

    try:
        return walk(ast.parse(str(expr), mode="eval"))
    except SyntaxError:
        raise CaseError(f"{where}: {expr!r} is not an expression") from None


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
        problems = [f"key `{'.'.join(str(p) for p in e['loc']) or '(top level)'}`: {e['msg']}"
                    for e in err.errors()[:3]]
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


def corpus_dir() -> Path:
    """The bundled corpus: corpus/cases next to the packages."""
    return Path(__file__).resolve().parents[1] / "corpus" / "cases"


def discover(root: Path | None = None, ids: list[str] | None = None) -> list[CaseSpec]:
    """Cases under ``root`` (default: the bundled corpus), optionally only ``ids`` (exact ids
    or unique prefixes such as "012"); CaseError for an id that matches nothing."""
    root = root or corpus_dir()
    folders = sorted(p for p in root.iterdir() if (p / "case.toml").is_file()) if \
        root.is_dir() else []
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
