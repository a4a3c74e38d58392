"""Which ``#if`` groups of an untrusted source the compiler reads, as clang itself decides.

The allow-list's pass over the source as written (allowlist.source_problems) sees every line,
also those of ``#if`` branches the compiler skips: llama.cpp's ggml-common.h holds CUDA, HIP and
C branches (``#include <cuda_fp16.h>``, ``__device__``) beside its Metal one. Refusing them
would refuse code Apple's compiler builds, so a finding inside a conditional group waits for
clang's verdict instead of failing the build at once.

The vetted TU (the source as written, preprocessed in the jail) then carries, right after each
group's opening directive (``#if``, ``#ifdef``, ``#ifndef``, ``#elif``, ``#else``), a marker line
``#pragma kport_live NONCE ID`` and a ``#line`` that puts the numbering back. ``clang -E`` keeps a
pragma of a group it reads and drops one of a group it skips, so the markers in its output are
the groups the compiler reads. Inside a macro's arguments, where an expansion could swallow a
marker of a group that is read, clang refuses the pragma ("embedding a #pragma directive within
macro arguments is not supported"), which fails the build: a marker cannot be hidden. The nonce
is a digest of the source, so a source cannot spell its own markers.

A finding is dropped only when clang skipped its line: a line in a group whose marker is absent,
or an ``#elif`` condition that clang does not evaluate (its enclosing group skipped, or an
earlier branch taken). Lexing problems never wait: they decide where the groups are.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from runners.cpplex import directives, lex_lines

_OPENS = {"if", "ifdef", "ifndef"}
_NEVER_WAITS = {"source"}  # allowlist.Problem.check values decided before any group is known


@dataclass(frozen=True)
class Group:
    """One branch of an ``#if`` chain: its content lines ``first``..``last``; the marker goes
    after line ``first - 1`` (where its opening directive ends); ``parent``: the enclosing
    group's id; ``earlier``: the ids of the branches before it in the same chain."""

    id: int
    first: int
    last: int
    parent: int | None
    earlier: tuple[int, ...]


@dataclass
class FileGroups:
    """The groups of one source file, and for each ``#elif`` line the branch it opens."""

    groups: list[Group] = field(default_factory=list)
    elif_lines: dict[int, int] = field(default_factory=dict)  # line -> id of the branch
    endif_ends: list[int] = field(default_factory=list)  # where each #endif's line ends


def find_groups(text: str) -> FileGroups:
    """The conditional groups of ``text``, by its directives as clang lexes them."""
    toks, _, ends = lex_lines(text)
    last_line = text.count("\n") + 1
    out = FileGroups()
    # each open chain: (parent id, ids of its branches so far, the open branch's (id, first))
    chains: list[tuple[int | None, list[int], tuple[int, int] | None]] = []

    def close(upto: int) -> None:
        parent, ids, current = chains[-1]
        if current is not None:
            gid, first = current
            out.groups.append(Group(gid, first, upto, parent, tuple(ids[:-1])))
            chains[-1] = (parent, ids, None)

    next_id = 0
    for d in directives(toks):
        if len(d) < 2:
            continue
        name, line = d[1].text, d[0].line
        end = ends.get(d[0].logical, last_line)
        if name in _OPENS:
            parent = chains[-1][2][0] if chains and chains[-1][2] else None
            chains.append((parent, [next_id], (next_id, end + 1)))
            next_id += 1
        elif name in ("elif", "else", "elifdef", "elifndef") and chains:
            close(line - 1)
            parent, ids, _ = chains[-1]
            if name != "else":  # its condition, over all its lines
                out.elif_lines.update(dict.fromkeys(range(line, end + 1), next_id))
            ids.append(next_id)
            chains[-1] = (parent, ids, (next_id, end + 1))
            next_id += 1
        elif name == "endif" and chains:
            close(line - 1)
            chains.pop()
            out.endif_ends.append(end)
    while chains:  # unterminated: clang refuses the file; the groups run to its end
        close(last_line)
        chains.pop()
    out.groups.sort(key=lambda g: g.id)
    return out


def nonce(*texts: str) -> str:
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]


def marked(text: str, groups: FileGroups, key: str) -> str:
    """``text`` with a marker pragma and a ``#line`` after each group's opening directive,
    and a ``#line`` after each ``#endif`` (a skipped group's ``#line`` is skipped with it):
    every line of the text keeps its number."""
    after = {g.first - 1: g.id for g in groups.groups}
    endifs = set(groups.endif_ends)
    lines = text.split("\n")
    out = []
    for number, line in enumerate(lines, start=1):
        out.append(line)
        if number == len(lines):
            break
        if number in after:
            out.append(f"#pragma kport_live {key} {after[number]}")
        if number in after or number in endifs:
            out.append(f"#line {number + 1}")
    return "\n".join(out)


@dataclass
class Pending:
    """Findings waiting for clang's verdict on their groups: file -> [(problem, the group it
    needs read, or for an #elif line the branch it opens)]."""

    key: str
    groups: dict[str, FileGroups]
    waiting: dict[str, list[tuple[object, int, bool]]]

    def __bool__(self) -> bool:
        return any(self.waiting.values())

    def mark(self, file: str, text: str) -> str:
        """The text of ``file`` for the vetted TU: with markers when findings wait on it."""
        return marked(text, self.groups[file], self._key(file)) if self.waiting.get(file) \
            else text

    def _key(self, file: str) -> str:
        return nonce(self.key, file)

    def resolve(self, preprocessed: str) -> tuple[list, str]:
        """(the waiting findings on lines clang read, ``preprocessed`` without the markers)."""
        read: dict[str, set[int]] = {}
        keys = {self._key(f): f for f in self.waiting if self.waiting[f]}
        kept_lines = []
        for line in preprocessed.split("\n"):
            m = _MARKER.match(line)
            if m and m[1] in keys:
                read.setdefault(keys[m[1]], set()).add(int(m[2]))
                kept_lines.append("")
            else:
                kept_lines.append(line)
        found = []
        for file, items in self.waiting.items():
            live = read.get(file, set())
            by_id = {g.id: g for g in self.groups[file].groups}
            for problem, gid, is_elif in items:
                if is_elif:  # evaluated when its chain is reached and no earlier branch ran
                    g = by_id[gid]
                    evaluated = (g.parent is None or g.parent in live) and not (
                        set(g.earlier) & live)
                    if evaluated:
                        found.append(problem)
                elif gid in live:
                    found.append(problem)
        return found, "\n".join(kept_lines)


_MARKER = re.compile(r"^\s*#\s*pragma\s+kport_live\s+([0-9a-f]{16})\s+(\d+)\s*$")


def without_markers(preprocessed: str) -> str:
    """``preprocessed`` with every marker line blanked (line numbers kept)."""
    return "\n".join("" if _MARKER.match(ln) else ln for ln in preprocessed.split("\n"))


def innermost(groups: FileGroups, line: int) -> Group | None:
    inside = [g for g in groups.groups if g.first <= line <= g.last]
    return min(inside, key=lambda g: g.last - g.first) if inside else None


def split(problems: list, texts: dict[str, str]) -> tuple[list, Pending]:
    """(the findings that fail the build now, those that wait for clang): a finding waits when
    its line is inside a conditional group of its file (or is an ``#elif`` line)."""
    key = nonce(*(f"{f}\0{t}" for f, t in sorted(texts.items())))
    groups = {f: find_groups(t) for f, t in texts.items()}
    now, waiting = [], {f: [] for f in texts}
    for p in problems:
        fg = groups.get(p.file)
        if fg is None or p.check in _NEVER_WAITS:
            now.append(p)
        elif p.line in fg.elif_lines:
            waiting[p.file].append((p, fg.elif_lines[p.line], True))
        elif (g := innermost(fg, p.line)) is not None:
            waiting[p.file].append((p, g.id, False))
        else:
            now.append(p)
    return now, Pending(key, groups, waiting)
