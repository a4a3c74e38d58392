"""Rewrites: the machine-applied part of the concept rules (kb/rules/rewrites.toml), used by the
offline translator. Each one names the concept rule it implements."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kb.concepts import load_rules
from runners.errors import KportError

REWRITES_FILE = Path(__file__).resolve().parent / "rules" / "rewrites.toml"


class RewriteError(KportError):
    """rewrites.toml is wrong; the message names the entry and key."""


class Rewrite(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rule: str
    name: list[str] = Field(min_length=1)
    to: str = ""
    args: list[int] = Field(default_factory=list)
    compound: str = ""  # [[atomic]]: the compound assignment that maps to `to`
    note: str = ""

    @field_validator("name", mode="before")
    @classmethod
    def _one_or_many(cls, v):
        return [v] if isinstance(v, str) else v


@dataclass(frozen=True)
class RewriteTable:
    """Lookups by spelling: calls by (name, arg count), identifiers, tokens, same-in-Metal."""

    calls: dict[tuple[str, int], Rewrite]
    idents: dict[str, Rewrite]
    tokens: dict[str, Rewrite]
    same: dict[str, Rewrite]
    atomics: dict[str, Rewrite]
    scoped: dict[str, Rewrite]  # `std::numeric_limits` -> the namespace it lives in in Metal
    library: frozenset[str] = frozenset()  # MSL functions with CUDA's name and meaning
    called: frozenset[str] = frozenset()  # the names of ``calls`` (load_rewrites fills it)

    def call_names(self) -> frozenset[str]:
        return self.called

    def constructs(self) -> set[str]:
        """Every spelling the table knows: what coverage counts."""
        return (self.call_names() | set(self.idents) | set(self.tokens) | set(self.same)
                | set(self.scoped))

    def compound_atomics(self) -> dict[str, str]:
        """Compound assignment on an atomic variable -> the Metal function it becomes."""
        return {rw.compound: rw.to for rw in self.atomics.values() if rw.compound}


Kind = Literal["call", "ident", "token", "same", "atomic", "scoped"]
_TABLES = {"ident": "idents", "token": "tokens", "same": "same", "atomic": "atomics",
           "scoped": "scoped"}


@functools.cache
def load_rewrites(path: Path = REWRITES_FILE) -> RewriteTable:
    """The rewrite table; RewriteError names the entry when a key or a rule id is wrong."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise RewriteError(f"{path}: {err}") from None
    known = {r.id for r in load_rules()}
    library = data.get("library", [])
    if not (isinstance(library, list) and all(isinstance(n, str) and n.isidentifier()
                                               for n in library)):
        raise RewriteError(f"{path}: `library` must be a list of function names")
    table = RewriteTable({}, {}, {}, {}, {}, {}, frozenset(library))
    for kind in ("call", "ident", "token", "same", "atomic", "scoped"):
        for i, raw in enumerate(data.get(kind, [])):
            try:
                rw = Rewrite(**raw)
            except ValidationError as err:
                e = err.errors()[0]
                raise RewriteError(f"{path}: [[{kind}]] #{i + 1} key "
                                   f"`{'.'.join(map(str, e['loc']))}`: {e['msg']}") from None
            if rw.rule not in known:
                raise RewriteError(f"{path}: [[{kind}]] #{i + 1}: no concept rule {rw.rule!r}")
            if kind == "scoped" and not all(n.count("::") == 1 for n in rw.name):
                raise RewriteError(f"{path}: [[scoped]] #{i + 1}: each name is NAMESPACE::MEMBER")
            if kind == "call" and not rw.args:
                raise RewriteError(f"{path}: [[call]] #{i + 1} ({rw.name[0]}): key `args` "
                                   "missing")
            for name in rw.name:
                if kind == "call":
                    for n in rw.args:
                        table.calls[(name, n)] = rw
                else:
                    getattr(table, _TABLES[kind])[name] = rw
    return replace(table, called=frozenset(n for n, _ in table.calls))
