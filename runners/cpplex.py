"""A C++ lexer for translation phases 1-3 as clang runs them in C++20 mode: line splices
removed, comments dropped, digraphs read as the tokens they stand for, every token located on
its physical line. The static checks of untrusted sources (runners/metal_sim/allowlist.py) read
this stream, so a directive hidden behind ``%:`` or a backslash-newline is still a directive.

What clang would accept but no kernel needs is reported as a problem instead of being lexed:
trigraphs (C++17 dropped them; older modes would read ``??=`` as ``#``), raw string literals,
universal character names and other characters outside the basic source set.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import NamedTuple

DIGRAPHS = {"%:%:": "##", "%:": "#", "<%": "{", "%>": "}", "<:": "[", ":>": "]"}
_PUNCT = sorted([
    "%:%:", "...", "<=>", "->*", "<<=", ">>=", "::", "->", "++", "--", "<<", ">>", "<=", ">=",
    "==", "!=", "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", ".*",
    "%:", "<%", "%>", "<:", ":>",
    "{", "}", "[", "]", "(", ")", ";", ":", "?", ".", "~", "!", "+", "-", "*", "/", "%", "^",
    "&", "|", "=", "<", ">", ",", "#",
], key=len, reverse=True)
_PUNCT_RE = re.compile("|".join(re.escape(p) for p in _PUNCT))
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*")
_STRING_PREFIX = re.compile(r"(?:u8|u|U|L)?(?=[\"'])")
_RAW_PREFIX = re.compile(r"(?:u8|u|U|L)?R\"")
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")


class Token(NamedTuple):
    """One preprocessing token. ``text`` is the spelling with splices removed and digraphs
    replaced by what they stand for; ``line`` is the physical line it starts on; ``logical``
    numbers the logical line (a directive is one logical line); ``bol`` marks the first token
    of a logical line; ``space`` marks one with whitespace or a comment before it. Immutable
    (lexed sources are cached and shared) and a named tuple, not a frozen dataclass: a 4 MB
    source is a million tokens, and a frozen dataclass takes three times as long to make."""

    kind: str  # identifier | number | string | char | punct
    text: str
    line: int
    logical: int
    bol: bool
    space: bool = True
    spelled: str = ""  # as written when it differs from text (a digraph)

    def on_line(self, line: int) -> Token:
        """This token located on ``line``."""
        return Token(self.kind, self.text, line, self.logical, self.bol, self.space,
                     self.spelled)


@dataclass(frozen=True)
class LexProblem:
    line: int
    message: str


# a line splice (backslash, blanks, newline) or a carriage return (\r\n and a lone \r end a line)
_LINE_BREAK = re.compile(r"\\[ \t\f\v]*(?:\r\n?|\n)|\r\n?")
_BLANKS = re.compile(r"[ \t\f\v]+")


def _splice(text: str) -> tuple[str, list[int]]:
    """Phase 2: remove backslash(-whitespace)-newline; returns the logical text and, for each
    of its characters, the physical line it came from."""
    out: list[str] = []
    lines: list[int] = []
    line, pos = 1, 0

    def copy(run: str) -> None:  # text with no splice and no \r: as it is, line by line
        nonlocal line
        parts = run.split("\n")
        for part in parts[:-1]:
            lines.extend([line] * (len(part) + 1))
            line += 1
        lines.extend([line] * len(parts[-1]))
        out.append(run)

    for m in _LINE_BREAK.finditer(text):
        copy(text[pos:m.start()])
        if m[0][0] != "\\":  # a carriage return: a newline
            out.append("\n")
            lines.append(line)
        line += 1
        pos = m.end()
    copy(text[pos:])
    return "".join(out), lines


def lex(text: str) -> tuple[list[Token], list[LexProblem]]:
    """The tokens of ``text`` and what in it no kernel source should contain."""
    toks, problems, _ = lex_lines(text)
    return toks, problems


def lex_lines(text: str) -> tuple[list[Token], list[LexProblem], dict[int, int]]:
    """``lex`` and, for each logical line that ends in a newline, the physical line holding
    that newline (past any splice, or a comment spanning lines)."""
    toks, problems, ends = _lexed(text)
    return list(toks), list(problems), dict(ends)


# The checks of one build lex the same source more than once (a 330 KB library three times);
# the last few results are kept (tokens are immutable; the caller gets its own lists).
@functools.lru_cache(maxsize=8)
def _lexed(text: str) -> tuple[tuple[Token, ...], tuple[LexProblem, ...], dict[int, int]]:
    src, phys = _splice(text)
    toks: list[Token] = []
    problems: list[LexProblem] = []
    ends: dict[int, int] = {}
    i, n, logical, bol, space = 0, len(src), 1, True, True

    def line_at(k: int) -> int:
        return phys[min(k, len(phys) - 1)] if phys else 1

    while i < n:
        c = src[i]
        if c == "\n":
            ends[logical] = phys[i]
            logical, bol, space = logical + 1, True, True
            i += 1
            continue
        if c in " \t\f\v":
            i, space = _BLANKS.match(src, i).end(), True
            continue
        if src.startswith("//", i):
            end = src.find("\n", i)
            i = n if end < 0 else end
            continue
        if src.startswith("/*", i):  # newlines inside do not end the logical line
            end = src.find("*/", i + 2)
            if end < 0:
                problems.append(LexProblem(line_at(i), "unterminated /* comment"))
                break
            i, space = end + 2, True
            continue
        start = i
        if _TRIGRAPH.match(src, i):
            problems.append(LexProblem(line_at(i), f"trigraph `{src[i:i + 3]}`: write the "
                                       "character itself"))
            i += 3
            continue
        if m := _RAW_PREFIX.match(src, i):
            problems.append(LexProblem(line_at(i), "raw string literal (R\"...\"): not MSL"))
            close = re.compile(r"\)" + re.escape(src[m.end():src.find("(", m.end())]) + '"')
            found = close.search(src, m.end())
            i = found.end() if found else n
            continue
        if m := _STRING_PREFIX.match(src, i):
            quote = src[m.end()]
            j = m.end() + 1
            while j < n and src[j] not in (quote, "\n"):
                j += 2 if src[j] == "\\" else 1
            if j >= n or src[j] != quote:
                problems.append(LexProblem(line_at(i), f"unterminated {quote} literal"))
                i = j
                continue
            i = j + 1
            toks.append(Token("string" if quote == '"' else "char", src[start:i], line_at(start),
                              logical, bol, space))
            bol = space = False
            continue
        if m := _IDENT.match(src, i):
            i = m.end()
            if i < n and (src[i] == "\\" or ord(src[i]) > 127):
                problems.append(LexProblem(line_at(i), "universal character name or non-ASCII "
                                           "character in an identifier"))
            toks.append(Token("identifier", m[0], line_at(start), logical, bol, space))
        elif m := _NUMBER.match(src, i):
            i = m.end()
            toks.append(Token("number", m[0], line_at(start), logical, bol, space))
        elif m := _PUNCT_RE.match(src, i):
            i = m.end()
            spelled = m[0]
            if spelled == "<:" and src.startswith("::", i - 1) and not src.startswith(
                    (":::", "::>"), i - 1):
                spelled, i = "<", i - 1  # `<::` is `<` `::` (C++11)
            text = DIGRAPHS.get(spelled, spelled)
            toks.append(Token("punct", text, line_at(start), logical, bol, space,
                              spelled if spelled != text else ""))
        else:
            what = "a backslash" if c == "\\" else (
                "a non-ASCII character" if ord(c) > 127 else f"the character {c!r}")
            problems.append(LexProblem(line_at(i), f"{what} outside strings and comments"))
            i += 1
            continue
        bol = space = False
    return tuple(toks), tuple(problems), ends


def directives(toks: list[Token]) -> list[list[Token]]:
    """The directives of a token stream, each as its tokens (the leading ``#`` first)."""
    out: list[list[Token]] = []
    for k, t in enumerate(toks):
        if t.bol and t.text == "#":
            end = k + 1
            while end < len(toks) and toks[end].logical == t.logical:
                end += 1
            out.append(toks[k:end])
    return out
