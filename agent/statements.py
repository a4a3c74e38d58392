"""A Metal kernel body as a tree of statements, read from its tokens
(runners.srcrewrite.tokenize: comments are left out, literals are whole tokens): what a repair
that moves statements needs (agent/restage.py). It knows the shapes a kernel body has: blocks,
for/while/do/if/switch, simple statements ending in ``;``, and ``#pragma`` lines, which belong to
the statement after them. Anything else (another directive, a label) raises StatementError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runners.srcrewrite import Tok

WORD = re.compile(r"[A-Za-z_]\w*$")
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
_OPEN = {"(": ")", "[": "]", "{": "}"}


class StatementError(ValueError):
    """A body the statement reader does not take (the repair using it then does nothing)."""


@dataclass(frozen=True)
class Stmt:
    kind: str  # block, for, while, do, if, switch or simple
    first: int  # index of its first token (a #pragma before it included)
    head: int  # index of its keyword (or first token)
    last: int  # index of its last token
    children: tuple[Stmt, ...] = ()  # a block's statements; the body (bodies) of a loop or if


def brackets(toks: list[Tok]) -> dict[int, int]:
    """Index of each opening ( [ { -> index of its closing partner; StatementError when they
    do not pair."""
    pairs, stack = {}, []
    for i, t in enumerate(toks):
        if t.text in _OPEN:
            stack.append(i)
        elif t.text in _OPEN.values():
            if not stack or _OPEN[toks[stack[-1]].text] != t.text:
                raise StatementError(f"line {t.line}: unpaired '{t.text}'")
            pairs[stack.pop()] = i
    if stack:
        raise StatementError(f"line {toks[stack[-1]].line}: unclosed '{toks[stack[-1]].text}'")
    return pairs


def statements(toks: list[Tok], start: int, end: int, pairs: dict[int, int]) -> list[Stmt]:
    """The statements of ``toks[start:end]`` (a block's inside, or a whole body), in order."""
    out, i = [], start
    while i < end:
        s = _statement(toks, i, pairs)
        out.append(s)
        i = s.last + 1
    return out


def _statement(toks: list[Tok], i: int, pairs: dict[int, int]) -> Stmt:
    first = i
    while i < len(toks) and toks[i].kind == "preproc_directive":
        if toks[i].text != "#pragma":
            raise StatementError(f"line {toks[i].line}: {toks[i].text} inside a body")
        line, i = toks[i].line, i + 1
        while i < len(toks) and toks[i].kind == "preproc_arg" and toks[i].line == line:
            i += 1
    if i >= len(toks):
        raise StatementError("a #pragma at the end of a block")
    word = toks[i].text
    if word == "{":
        close = pairs[i]
        return Stmt("block", first, i, close, tuple(statements(toks, i + 1, close, pairs)))
    if word in ("for", "while", "switch", "if"):
        close = _paren(toks, i + 1, pairs)
        body = _statement(toks, close + 1, pairs)
        parts = (body,)
        if word == "if" and body.last + 1 < len(toks) and toks[body.last + 1].text == "else":
            parts = (body, _statement(toks, body.last + 2, pairs))
        return Stmt(word, first, i, parts[-1].last, parts)
    if word == "do":
        body = _statement(toks, i + 1, pairs)
        j = body.last + 1
        if j >= len(toks) or toks[j].text != "while":
            raise StatementError(f"line {toks[i].line}: do without while")
        close = _paren(toks, j + 1, pairs)
        if close + 1 >= len(toks) or toks[close + 1].text != ";":
            raise StatementError(f"line {toks[i].line}: do-while without ';'")
        return Stmt("do", first, i, close + 1, (body,))
    if word in ("else", "case", "default", "}") or (
            i + 1 < len(toks) and toks[i + 1].text == ":" and WORD.match(word)):
        raise StatementError(f"line {toks[i].line}: '{word}' where a statement starts")
    j = i
    while j < len(toks) and toks[j].text not in (";", ")", "]", "}"):
        j = pairs.get(j, j) + 1
    if j >= len(toks) or toks[j].text != ";":
        raise StatementError(f"line {toks[i].line}: statement without ';'")
    return Stmt("simple", first, i, j)


def _paren(toks: list[Tok], i: int, pairs: dict[int, int]) -> int:
    if i >= len(toks) or toks[i].text != "(":
        raise StatementError(f"line {toks[i - 1].line}: '{toks[i - 1].text}' without '('")
    return pairs[i]


def walk(stmts: list[Stmt] | tuple[Stmt, ...]):
    """Every statement of ``stmts`` and all statements nested in them, outer ones first."""
    for s in stmts:
        yield s
        yield from walk(s.children)


def escapes(s: Stmt, toks: list[Tok], loop: bool = False, switch: bool = False) -> bool:
    """Whether control can leave ``s`` other than by falling off its end: a return or goto,
    or a break or continue not bound by a loop (or switch, for break) inside ``s``."""
    if s.kind == "simple":
        words = {t.text for t in toks[s.head:s.last + 1]}
        return bool(words & {"return", "goto"}) or ("break" in words and not (loop or switch)) \
            or ("continue" in words and not loop)
    inner_loop = loop or s.kind in ("for", "while", "do")
    inner_switch = switch or s.kind == "switch"
    head_end = s.children[0].first if s.children and s.kind != "block" else s.head
    if any(t.text in ("return", "goto") for t in toks[s.head:head_end]):
        return True  # a statement expression in a condition: not worth reading further
    return any(escapes(c, toks, inner_loop, inner_switch) for c in s.children)
