"""Concept rules: what each CUDA construct becomes in Metal, as data (kb/rules/concepts/*.toml).

Every rule carries a tiny CUDA example and its Metal translation that run under one small
launch contract (see docs/kb-rules.md), so tests/knowledge runs each pair in cuda_sim and
metal_sim and requires equal results: the knowledge is executable. The glossary
(kb/rules/glossary.toml) gives the plain words for spellings that do not say what they do.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runners.dtypes import known_dtype
from runners.errors import KportError

RULES_DIR = Path(__file__).resolve().parent / "rules" / "concepts"
GROUPS = ("launch", "memory", "sync", "warp", "atomics", "types", "math", "intrinsics",
          "tensor", "cooperative", "host", "debug", "fp64", "cub")
# Metal libraries a port's header may carry (kb/rules/metal/NAME.metal); an example's
# metal_header names one on a line `// kport library: NAME`, replaced by its text.
METAL_LIBRARIES = Path(__file__).resolve().parent / "rules" / "metal"
_LIBRARY_LINE = re.compile(r"^// kport library: (\w+)$", re.M)


@functools.cache
def metal_library(name: str) -> str:
    """The text of kb/rules/metal/``name``.metal; KportError when there is none."""
    path = METAL_LIBRARIES / f"{name}.metal"
    if not path.is_file():
        raise KportError(f"no Metal library {name!r}: expected {path}")
    return path.read_text()


class RuleError(KportError):
    """A rules file is wrong; the message names the file, the rule and the key."""


class Example(BaseModel):
    """A runnable pair. CUDA: ``extern "C" __global__ void k(const IN* x, OUT* y, int n)``
    launched as ``grid`` x ``block``; Metal: a metal_kernel body with inputs x, n and output y,
    launched with ``threads`` and ``threadgroup``. y starts as ``y_init`` on both sides."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cuda: str
    metal: str
    metal_header: str = ""
    n: int = 64
    in_dtype: str = "float32"
    out_dtype: str = "float32"
    out_size: int | None = None  # default n
    init: str = "normal"  # normal | arange | randint:LO:HI | uniform:LO:HI
    y_init: float = 0.0
    grid: list[int] = Field(default_factory=lambda: [1, 1, 1])
    block: list[int] = Field(default_factory=lambda: [64, 1, 1])
    shared_mem: int = 0
    threads: list[int] | None = None  # default grid * block
    threadgroup: list[int] | None = None  # default block
    template: dict[str, int | bool | str] = Field(default_factory=dict)
    atomic_outputs: bool = False
    rtol: float = 1e-5
    atol: float = 1e-6

    _dtype = field_validator("in_dtype", "out_dtype")(lambda v: known_dtype(v))
    _library = field_validator("metal_header")(
        lambda v: _LIBRARY_LINE.sub(lambda m: metal_library(m[1]), v))


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z0-9_]+\.[a-z0-9_.]+$")
    group: Literal[GROUPS]  # type: ignore[valid-type]
    title: str
    cuda: list[str] = Field(min_length=1)  # identifiers/keywords that mark the construct
    match: list[str] | None = None  # token sequences that mark it in code; default: cuda
    metal: str  # the Metal form
    notes: str = ""
    pitfalls: list[str] = Field(default_factory=list)
    # How someone who needs this rule asks for it: symptoms, error messages, the words of a
    # question (document expansion, docs/kb.md "Asked as"); searched, never shown as the rule.
    asked: list[str] = Field(default_factory=list)
    source: str = ""  # where the fact comes from
    unconfirmed: bool = False
    example: Example

    @property
    def markers(self) -> list[str]:
        """The token sequences whose presence in a kernel means this rule applies."""
        return self.cuda if self.match is None else self.match


def load_rules(folder: Path = RULES_DIR) -> list[Rule]:
    """Every rule of every .toml file under ``folder``, ids unique; RuleError otherwise.
    Parsed once per process and folder (rules are frozen models)."""
    return list(_load_rules(Path(folder)))


@functools.cache
def _load_rules(folder: Path) -> tuple[Rule, ...]:
    rules: list[Rule] = []
    seen: dict[str, Path] = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise RuleError(f"{path}: not valid TOML: {err}") from None
        for i, raw in enumerate(data.get("rule", [])):
            try:
                rule = Rule(**raw)
            except ValidationError as err:
                e = err.errors()[0]
                key = ".".join(str(p) for p in e["loc"])
                name = raw.get("id", f"#{i + 1}")
                raise RuleError(f"{path}: rule {name}: key `{key}`: {e['msg']}") from None
            if rule.id in seen:
                raise RuleError(f"{path}: rule id {rule.id!r} also defined in {seen[rule.id]}")
            seen[rule.id] = path
            rules.append(rule)
    return tuple(rules)


GLOSSARY = Path(__file__).resolve().parent / "rules" / "glossary.toml"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.cache
def load_glossary(path: Path = GLOSSARY) -> tuple[tuple[frozenset[str], str], ...]:
    """(spellings, plain words) of each [[term]] of ``path``; RuleError naming the term and key
    when a term lacks either or a spelling is not one identifier."""
    try:
        terms = tomllib.loads(path.read_text()).get("term", [])
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise RuleError(f"{path}: cannot read the glossary ({err})") from None
    out = []
    for n, term in enumerate(terms, 1):
        spellings, words = term.get("spellings"), term.get("words")
        if not isinstance(spellings, list) or not spellings or not isinstance(words, str) \
                or not words.strip():
            raise RuleError(f"{path}: term {n}: give `spellings` (a list) and `words` (a string)")
        bad = [s for s in spellings if not isinstance(s, str) or not _WORD.fullmatch(s)]
        if bad:
            raise RuleError(f"{path}: term {n}: spelling {bad[0]!r} is not one identifier")
        out.append((frozenset(spellings), words.strip()))
    return tuple(out)


def also_called(*texts: str) -> list[str]:
    """The glossary's plain words for the spellings that ``texts`` name (whole identifiers; a
    rule's CUDA spellings, Metal form and title), in glossary order."""
    names = set(_WORD.findall(" ".join(texts)))
    return [words for spellings, words in load_glossary() if spellings & names]
