"""Exact retrieval: the concept rules whose CUDA constructs occur in a kernel.

A rule's markers (``match``, else its ``cuda`` list) are token sequences; a marker occurs where
its tokens appear contiguously in the kernel's tree-sitter tokens, so spacing and comments do not
matter and ``threadIdx.x`` never matches inside ``my_threadIdx``. ``A && B`` occurs where A does,
provided B occurs somewhere in the same kernel. The result is complete (every
rule with an occurrence) and ordered by first occurrence, then rule id.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path

from kb.concepts import Rule, load_rules
from kb.parse import Token, functions, kernel_closure, kernel_names, parse, tokens
from runners.cuda_sim.reading import nvcc_options, read_as_compiled
from runners.errors import KportError
from runners.srcrewrite import SourceError


class RulesQueryError(KportError):
    """The source cannot be read or the named kernel is not in it."""


@dataclass(frozen=True)
class RuleHit:
    rule_id: str
    title: str
    group: str
    cuda: list[str]  # the markers found
    metal: str
    occurrences: int
    lines: list[int]
    notes: str
    pitfalls: list[str]
    unconfirmed: bool
    where: list[str] = field(default_factory=list)  # FILE:LINE of each line, in any header

    def as_json(self) -> dict:
        return {"rule_id": self.rule_id, "title": self.title, "group": self.group,
                "cuda": self.cuda, "metal": self.metal, "occurrences": self.occurrences,
                "lines": self.lines, "where": self.where, "notes": self.notes,
                "pitfalls": self.pitfalls, "unconfirmed": self.unconfirmed}


@functools.cache
def _marker_tokens(marker: str) -> tuple[str, ...]:
    data = marker.encode()
    return tuple(t.text for t in tokens(parse(data, "cuda"), data))


def _find(seq: list[str], pat: tuple[str, ...], starts: dict[str, list[int]]) -> list[int]:
    """Where ``pat`` occurs in ``seq``; ``starts`` maps each token to its positions (so a
    marker costs its first token's occurrences, not the whole kernel)."""
    if not pat:
        return []
    n = len(pat)
    return [i for i in starts.get(pat[0], ()) if n == 1 or tuple(seq[i:i + n]) == pat]


def match_rules(toks: list[Token], rules: list[Rule] | None = None) -> list[RuleHit]:
    """Every rule with a marker among ``toks``, ordered by first line then id."""
    texts = [t.text for t in toks]
    starts: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        starts.setdefault(text, []).append(i)
    hits = []
    for rule in rules if rules is not None else load_rules():
        found, lines = [], set()
        count = 0
        for marker in rule.markers:
            first, *rest = marker.split(" && ")
            at = _find(texts, _marker_tokens(first), starts)
            if at and all(_find(texts, _marker_tokens(p), starts) for p in rest):
                found.append(marker)
                count += len(at)
                lines.update(toks[i].line for i in at)
        if found:
            hits.append(RuleHit(rule.id, rule.title, rule.group, found, rule.metal, count,
                                sorted(lines), rule.notes, list(rule.pitfalls), rule.unconfirmed))
    hits.sort(key=lambda h: (h.lines[0], h.rule_id))
    return hits


def kernel_tokens(src: str, kernel: str | None = None, where: str = "<source>") -> list[Token]:
    """Tokens of ``kernel`` and the functions it calls (with line numbers of ``src``), or of the
    whole source when no kernel is named. RulesQueryError when the kernel is not there."""
    if kernel is None:
        data = src.encode()
        return tokens(parse(data, "cuda"), data)
    funcs = functions(src, "cuda")
    name = kernel.split("<")[0]
    found = [f for f in funcs if f.name == name]
    if not found:
        raise RulesQueryError(f"{where}: no kernel named {name!r}; kernels here: "
                              f"{', '.join(kernel_names(funcs)) or 'none'}")
    table = {f.name: f for f in funcs if f.kind != "kernel"}
    return [t for f in kernel_closure(found[0], table) for t in f.tokens]


def rules_for_file(path: Path, kernel: str | None = None, include=(),
                   define=()) -> list[RuleHit]:
    """The concept rules that apply to a CUDA file (or one kernel in it and what it calls,
    in whichever header), read as nvcc reads it: its folder and ``include`` searched for local
    headers, ``define`` set, ``#if`` groups the build skips left out. Without a kernel, the
    file's own lines only. ``lines`` are the file's lines; ``where`` says FILE:LINE of each."""
    path = Path(path)
    try:
        view = read_as_compiled(path.read_text(), path.name,
                                nvcc_options(path, include, define))
    except (OSError, UnicodeDecodeError) as err:
        raise RulesQueryError(f"{path}: cannot read ({err})") from None
    except (ValueError, SourceError) as err:
        raise RulesQueryError(str(err)) from None
    toks = kernel_tokens(view.text, kernel, str(path))
    if kernel is None:
        toks = [t for t in toks if 1 <= t.line <= len(view.origin)
                and view.origin[t.line - 1][0] == path.name]
    out = []
    for h in match_rules(toks):
        at = [view.origin[n - 1] if 1 <= n <= len(view.origin) else (path.name, n)
              for n in h.lines]
        out.append(replace(h, where=[f"{f}:{n}" for f, n in at],
                           lines=sorted({n for f, n in at if f == path.name})))
    return out
