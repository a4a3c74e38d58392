"""Fix rules: frequent Metal compile and runtime errors and what fixes them, as data
(kb/rules/fixes/*.toml).

A rule's ``pattern`` is a Python regex searched in one error message: a compiler diagnostic
(``source.metal:2:1: error: use of undeclared identifier 'threadIdx'``), a simulator finding
(``source.metal:3: race: race on threadgroup variable 's' ...``) or an exception's text.
``origin`` says whose wording the pattern follows. Rules from ``metal_sim`` carry a ``trigger``
kernel that tests/knowledge/test_fixes.py runs in the simulator to check that the pattern matches
the diagnostic it really produces; MLX and Apple-compiler wordings nobody has seen on a Mac are
``unconfirmed``.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from runners.dtypes import known_dtype
from runners.errors import KportError

FIXES_DIR = Path(__file__).resolve().parent / "rules" / "fixes"
Origin = Literal["metal_sim", "mlx", "metal_compiler"]


class FixRuleError(KportError):
    """A fixes file is wrong; the message names the file, the rule and the key."""


class Trigger(BaseModel):
    """A metal_kernel launch that makes metal_sim report the rule's error. Inputs are
    ``arange(n)`` of ``in_dtype`` (``inputs`` of them, default one per input name); every output
    has ``n`` elements of ``out_dtype`` starting at ``init_value``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    body: str
    header: str = ""
    input_names: list[str] = Field(default_factory=lambda: ["x"])
    output_names: list[str] = Field(default_factory=lambda: ["y"])
    inputs: int | None = None
    n: int = 32
    in_dtype: str = "float32"
    out_dtype: str = "float32"
    init_value: float | None = 0.0
    grid: list[int] = Field(default_factory=lambda: [32, 1, 1])
    threadgroup: list[int] = Field(default_factory=lambda: [32, 1, 1])
    template: dict[str, int | bool | str] = Field(default_factory=dict)
    atomic_outputs: bool = False
    timeout_s: float | None = None  # KPORT_SIM_TIMEOUT for this launch

    _dtype = field_validator("in_dtype", "out_dtype")(lambda v: known_dtype(v))


class FixRule(BaseModel):
    """One error and its fix. Higher ``priority`` is tried first (catch-alls are negative)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z0-9_]+\.[a-z0-9_]+$")
    title: str
    pattern: str
    fix: str
    origin: Origin
    example_error: str
    sources: list[str] = Field(min_length=1)
    asked: list[str] = Field(default_factory=list)  # as Rule.asked
    unconfirmed: bool = False
    priority: int = 0
    trigger: Trigger | None = Field(default=None, validate_default=True)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as err:
            raise ValueError(f"not a valid Python regex: {err}") from None
        return v

    @field_validator("example_error")
    @classmethod
    def _example_matches(cls, v: str, info: ValidationInfo) -> str:
        pattern = info.data.get("pattern")
        if pattern is not None and not re.search(pattern, v):
            raise ValueError("`pattern` does not match this example")
        return v

    @field_validator("trigger")
    @classmethod
    def _trigger_for_sim_only(cls, v: Trigger | None, info: ValidationInfo) -> Trigger | None:
        origin = info.data.get("origin")
        if origin == "metal_sim" and v is None:
            raise ValueError("a metal_sim rule needs a trigger that produces its error")
        if origin is not None and origin != "metal_sim" and v is not None:
            raise ValueError("only metal_sim rules have a trigger")
        return v

    def matches(self, message: str) -> bool:
        """Whether the rule's pattern occurs in ``message``."""
        return re.search(self.pattern, message) is not None


def _key_of(err: ValidationError) -> tuple[str, str]:
    e = err.errors()[0]
    loc = [str(p) for p in e["loc"]]
    return (".".join(loc) or "(rule)"), e["msg"]


def load_fixes(folder: Path = FIXES_DIR) -> list[FixRule]:
    """Every rule of every .toml file under ``folder``, highest priority first (file order
    within one priority); FixRuleError naming file, rule and key, or a repeated id."""
    rules: list[FixRule] = []
    seen: dict[str, Path] = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise FixRuleError(f"{path}: not valid TOML: {err}") from None
        for i, raw in enumerate(data.get("fix", [])):
            name = raw.get("id", f"#{i + 1}")
            try:
                rule = FixRule(**raw)
            except ValidationError as err:
                key, msg = _key_of(err)
                raise FixRuleError(f"{path}: rule {name}: key `{key}`: {msg}") from None
            if rule.id in seen:
                raise FixRuleError(f"{path}: rule {rule.id}: key `id`: also defined in "
                                   f"{seen[rule.id]}")
            seen[rule.id] = path
            rules.append(rule)
    return sorted(rules, key=lambda r: -r.priority)


@functools.cache
def _default_fixes() -> tuple[FixRule, ...]:
    return tuple(load_fixes())


def match_fixes(message: str, rules: list[FixRule] | None = None) -> list[FixRule]:
    """The rules whose pattern occurs in ``message``, most specific (highest priority) first;
    empty when none does."""
    return [r for r in (rules if rules is not None else _default_fixes()) if r.matches(message)]
