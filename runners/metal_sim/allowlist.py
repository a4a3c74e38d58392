"""Static checks of untrusted Metal: an allow-list of what MSL permits (allowlist.toml), run on
every source metal_sim builds, before anything runs.

This module's pass, ``source_problems``, reads the source's own tokens (runners/cpplex.py: after
line splices, with digraphs read as what they stand for): directives, names, keywords and
attributes, so a reserved name (``__x86_64__``, ``__tsan_read4``, ``_Pragma``), an ``#include``
of a file or a ``#line`` never reaches the compiler. Token pasting (``##``) is refused, so every
name the compiler sees in the source is one this pass saw. The passes over what the compiler
makes of the source (its preprocessed tokens, its linked library) are in expanded.py. Findings
name the file and line of the user's source.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from runners import srcrewrite
from runners.cpplex import Token, directives, lex
from runners.simbuild import Diagnostic

RULES_FILE = Path(__file__).with_name("allowlist.toml")
# C++ keywords and the MSL words a #define may not take over.
KEYWORDS = set("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char
char8_t char16_t char32_t class compl concept const consteval constexpr constinit const_cast
continue co_await co_return co_yield decltype default delete do double dynamic_cast else enum
explicit export extern false float for friend goto if inline int long mutable namespace new
noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires return short signed sizeof static static_assert static_cast struct
switch template this thread_local throw true try typedef typeid typename union unsigned using
virtual void volatile wchar_t while xor xor_eq device constant thread threadgroup kernel half
bfloat uint ushort uchar""".split())
_RESERVED = re.compile(r"^(__|_[A-Z])")
# `#include <metal_*>` alone on its line (a `//` comment may follow, but no line splice: the
# TU blanks the whole line, which must not change what the next line means)
_INCLUDE_LINE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<metal_\w+>[ \t]*(//[^\\]*)?$")


@dataclass(frozen=True)
class Problem:
    """Something the allow-list refuses, where it is and which check refused it."""

    file: str
    line: int
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.check}: {self.message}"

    def diagnostic(self) -> Diagnostic:
        """As a compile error of the user's file and line."""
        return Diagnostic(self.file, self.line, 1, "error",
                          f"not allowed in a Metal kernel [{self.check}]: {self.message}")


@functools.lru_cache(maxsize=1)
def rules() -> dict:
    data = tomllib.loads(RULES_FILE.read_text())
    data["pragma_res"] = [re.compile(p) for p in data["pragmas"]]
    return data


def _directive_problems(d: list[Token], file: str) -> list[Problem]:
    r, line = rules(), d[0].line
    if len(d) == 1:
        return []  # the null directive
    name = d[1].text
    if d[1].kind == "number" or name == "line":
        return [Problem(file, line, "directive", "#line and line markers are not allowed: "
                        "they would change where the compiler thinks code comes from")]
    if name == "include":
        parts = [t.text for t in d[2:]]
        if len(parts) == 3 and parts[0] == "<" and parts[2] == ">" and parts[1] in r["includes"]:
            return []
        return [Problem(file, line, "include", f"#include {' '.join(parts)}: only Apple's own "
                        "headers (<metal_stdlib> and the other <metal_*>) may be included")]
    if name == "pragma":
        return pragma_problems(d[2:], file, line)
    if name not in r["directives"]:
        return [Problem(file, line, "directive", f"#{name} is not allowed in a kernel source")]
    if name == "define":
        return _define_problems(d, file)
    return []


def pragma_problems(body: list[Token], file: str, line: int) -> list[Problem]:
    """A pragma's tokens against the allowed forms; `unroll(expr)` may take any expression
    over names and numbers (llama.cpp writes `#pragma unroll(chpt)`)."""
    text = " ".join(t.text for t in body)
    if any(p.match(text) for p in rules()["pragma_res"]):
        return []
    if len(body) > 3 and [t.text for t in body[:2]] == ["unroll", "("] and body[-1].text == ")" \
            and all(t.kind in ("identifier", "number") or t.text in _EXPR_PUNCT
                    for t in body[2:-1]):
        return []
    return [Problem(file, line, "pragma", f"#pragma {text}: only loop-unrolling, `once`, "
                    "METAL fp and diagnostic pragmas are allowed")]


_EXPR_PUNCT = set("+-*/%()<>&|^~!?:,") | {"<<", ">>", "<=", ">=", "==", "!=", "&&", "||"}


def _pragma_operator_problems(toks: list[Token], k: int, file: str) -> list[Problem]:
    """``_Pragma("...")`` (real kernels hide `clang loop unroll(full)` in macros): only with a
    plain string literal whose pragma is an allowed one, never a stringized parameter."""
    t = toks[k]
    if not (k + 3 < len(toks) and toks[k + 1].text == "(" and toks[k + 2].kind == "string"
            and toks[k + 2].text.startswith('"') and toks[k + 3].text == ")"):
        return [Problem(file, t.line, "pragma", "_Pragma needs one plain string literal")]
    inner = toks[k + 2].text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    body, problems = lex(inner)
    return [Problem(file, t.line, "pragma", "_Pragma: a malformed pragma")] if problems else \
        pragma_problems(body, file, t.line)


def _define_problems(d: list[Token], file: str) -> list[Problem]:
    line = d[0].line
    if len(d) < 3 or d[2].kind != "identifier":
        return [Problem(file, line, "directive", "#define needs a name")]
    if d[2].text in KEYWORDS:
        return [Problem(file, line, "directive", f"#define {d[2].text} redefines a keyword")]
    body, params = d[3:], set()
    # function-like: `(` right after the name, with no space between
    if body and body[0].text == "(" and not body[0].space:
        close = next((k for k, t in enumerate(body) if t.text == ")"), len(body))
        params = {t.text for t in body[1:close] if t.kind == "identifier"} | {"__VA_ARGS__"}
        body = body[close + 1:]
    for k, t in enumerate(body):
        nxt = body[k + 1].text if k + 1 < len(body) else ""
        if t.text == "#" and nxt not in params:
            return [Problem(file, line, "directive", "`#` in a macro body may only stringize a "
                            "parameter of a function-like macro")]
    return []


def attribute_problems(toks: list[Token], k: int, file: str) -> list[Problem]:
    """``[[ ... ]]`` starting at toks[k]: allowed names only."""
    allowed = set(rules()["attributes"])
    depth, j, items, current = 0, k + 2, [], []
    while j < len(toks):
        t = toks[j]
        if depth == 0 and t.text == "]" and j + 1 < len(toks) and toks[j + 1].text == "]":
            break
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth -= 1
        if depth == 0 and t.text == ",":
            items.append(current)
            current = []
        else:
            current.append(t)
        j += 1
    items.append(current)
    out = []
    for item in items:
        if not item:
            continue
        if any(t.text in ("::", "using") for t in item) or item[0].text not in allowed:
            spelled = " ".join(t.text for t in item)
            out.append(Problem(file, item[0].line, "attribute", f"[[{spelled}]] is not a Metal "
                               "attribute kport allows (scoped attributes such as "
                               "clang::... never are)"))
    return out


def gnu_attribute_problems(toks: list[Token], k: int, file: str) -> list[Problem]:
    """``__attribute__((a, b(1)))`` at toks[k]: every name in gnu_attributes."""
    allowed = set(rules()["gnu_attributes"])
    if k + 2 >= len(toks) or toks[k + 1].text != "(" or toks[k + 2].text != "(":
        return [Problem(file, toks[k].line, "attribute", "__attribute__ must be followed by "
                        "((...))")]
    depth, j, expect_name = 2, k + 3, True
    while j < len(toks) and depth >= 2:
        t = toks[j]
        if expect_name and depth == 2 and t.kind == "identifier":
            if t.text not in allowed:
                return [Problem(file, t.line, "attribute", f"__attribute__(({t.text})) is not "
                                f"allowed (only {', '.join(sorted(allowed))})")]
            expect_name = False
        elif t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
        elif t.text == "," and depth == 2:
            expect_name = True
        j += 1
    return []


# MSL's own words (address spaces, function qualifiers, its type names): declaring a name that
# is one is an error in Apple's compiler, though metal_sim's C++ shims would take it
_MSL_WORDS = {"device", "constant", "thread", "threadgroup", "threadgroup_imageblock", "kernel",
              "vertex", "fragment", "half", "bfloat", "uint", "ushort", "uchar", "ulong"}
_TYPE_WORDS = {"int", "float", "char", "bool", "short", "long", "unsigned", "signed", "double",
               "void", "auto", "half", "uint", "ushort", "uchar", "bfloat", "size_t"}


# words before a name that do not make it a declared one (`return half(x)`, `const half h`)
_NOT_TYPES = {"return", "case", "sizeof", "else", "do", "typedef", "using", "const", "constexpr",
              "static", "inline", "volatile", "typename", "struct", "class", "operator",
              "device", "constant", "thread", "threadgroup", "alignof", "decltype"}


def _declares(toks: list[Token], k: int) -> bool:
    """Whether toks[k] is the name a declaration declares (``int kernel = 3;``, ``float half;``,
    ``void vertex(...)``): a type or declarator before it, ``=``, ``;``, ``,``, ``[``, ``)`` or
    ``(`` after it."""
    if k == 0 or k + 1 >= len(toks) or toks[k + 1].text not in ("=", ";", ",", "[", ")", "("):
        return False
    prev = toks[k - 1]
    if prev.text in ("*", "&", ">"):  # `float * half;`, not `2u * uint(x)`
        return toks[k + 1].text != "("
    return prev.text in _TYPE_WORDS or (prev.kind == "identifier" and prev.text not in _NOT_TYPES)


def _name_problems(t: Token, file: str) -> list[Problem]:
    r = rules()
    if t.kind != "identifier":
        return []
    if t.text in r["forbidden"]:
        return [Problem(file, t.line, "keyword", f"`{t.text}`: {r['forbidden'][t.text]}")]
    if _RESERVED.match(t.text) and t.text not in r["reserved_allowed"]:
        return [Problem(file, t.line, "reserved-name", f"`{t.text}` is reserved to the "
                        "compiler and kport (predefined macros, sanitizer hooks, builtins); "
                        "kernels may not name it")]
    return []


def _defined_operand(toks: list[Token], k: int) -> bool:
    """Whether toks[k] is only tested for being defined: ``defined X``, ``defined(X)``, or
    the name of an ``#ifdef``/``#ifndef``/``#elifdef``/``#elifndef``."""
    before = [t.text for t in toks[max(0, k - 2):k]]
    if before[-1:] == ["defined"]:
        return True
    if before == ["defined", "("]:
        return k + 1 < len(toks) and toks[k + 1].text == ")"
    return len(before) == 2 and before[0] == "#" and toks[k - 2].bol and before[1] in (
        "ifdef", "ifndef", "elifdef", "elifndef")


def source_problems(text: str, file: str, *, body: bool = False) -> list[Problem]:
    """What the allow-list refuses in one source as written (before preprocessing). ``body``:
    ``text`` is a kernel's body (an MLX ``source``), not a header or a .metal file."""
    toks, lexed = lex(text)
    lines = text.split("\n")
    out = [Problem(file, p.line, "source", p.message) for p in lexed]
    if not lexed:
        out += [Problem(file, line, "threadgroup", message)
                for line, message in srcrewrite.group_storage_problems(text, body=body)]
    in_define = set()
    for d in directives(toks):
        out += _directive_problems(d, file)
        if len(d) > 1 and d[1].text == "include" and not _directive_problems(d, file) and \
                not _INCLUDE_LINE.match(lines[d[0].line - 1]):
            out.append(Problem(file, d[0].line, "include", "write #include <metal_...> alone "
                               "on one line, as written here: `#include <metal_stdlib>`"))
        if len(d) > 1 and d[1].text == "define":
            in_define.add(d[0].logical)
    for k, t in enumerate(toks):
        if t.text == "##":
            out.append(Problem(file, t.line, "token-pasting", "`##` is not allowed: it can make "
                               "names the checks cannot see before preprocessing"))
        elif t.text == "#" and not t.bol and t.logical not in in_define:
            out.append(Problem(file, t.line, "directive", "a `#` that starts no directive"))
        if not (t.text in rules()["defined_tests"] and _defined_operand(toks, k)):
            out += _name_problems(t, file)
        if t.text in _MSL_WORDS and t.logical not in in_define and _declares(toks, k):
            out.append(Problem(file, t.line, "keyword", f"`{t.text}` is a Metal keyword: MSL "
                               "does not let a variable, parameter or function take its name "
                               "(metal_sim's C++ would; Apple's compiler does not)"))
        if t.text == "__attribute__":
            out += gnu_attribute_problems(toks, k, file)
        elif t.text == "_Pragma":
            out += _pragma_operator_problems(toks, k, file)
        elif t.text == "[" and k + 1 < len(toks) and toks[k + 1].text == "[" and \
                t.logical not in in_define:
            out += attribute_problems(toks, k, file)
    return out


def mlx_parts_problems(header: str, body: str) -> list[Problem]:
    """source_problems of an MLX metal_kernel's two parts: its header and its body. A port may
    not test the MSL version (a .metal library may): metal_sim compiles as MSL 3.1 only, so
    code for another version would be judged by code that never ran."""
    out = []
    for text, file, is_body in ((header, "header.metal", False), (body, "source.metal", True)):
        out += source_problems(text, file, body=is_body)
        out += [Problem(file, t.line, "reserved-name", "`__METAL_VERSION__`: a port runs on "
                        "every MSL version MLX builds with (3.1 to 4.1) and is checked as 3.1; "
                        "write one code path") for t in lex(text)[0]
                if t.text == "__METAL_VERSION__"]
    return out


def ends_in_directive(text: str) -> bool:
    """Whether the last logical line of ``text`` is a preprocessor directive."""
    toks, _ = lex(text)
    found = directives(toks)
    return bool(toks and found and found[-1][-1] is toks[-1])


def macro_names(text: str) -> list[str]:
    """Every name ``text`` #defines, so the TU can #undef them after the candidate's part."""
    toks, _ = lex(text)
    return sorted({d[2].text for d in directives(toks) if len(d) > 2 and d[1].text == "define"
                   and d[2].kind == "identifier"})


def blank_includes(text: str) -> str:
    """``text`` with its ``#include <metal_*>`` lines blanked (the TU includes the simulator's
    own metal_stdlib); newlines kept, so lines still match. source_problems refuses an include
    written any other way."""
    return "\n".join("" if _INCLUDE_LINE.match(ln) else ln for ln in text.split("\n"))


def check_names(names: list[str], what: str) -> None:
    """ValueError unless every name is a plain identifier a kernel may declare (not reserved,
    not a keyword): MLX pastes them into the kernel's signature."""
    for name in names:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name) or name in KEYWORDS or (
                name in rules()["forbidden"]):
            raise ValueError(f"[metal_kernel] {what} {name!r} is not a name a kernel may use: "
                             "letters, digits and _, starting with a letter, not a keyword")
