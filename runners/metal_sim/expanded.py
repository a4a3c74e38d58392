"""The allow-list's passes over what the compiler makes of an untrusted Metal source, run by
metal_sim's builds in the jail (runners/simbuild.Vetting): ``preprocessed_problems`` reads the
candidate's part of ``clang -E`` output, after every macro is expanded (attributes, storage,
function pointers, the balance of brackets, includes), so ``#define CLOSE }`` cannot leave the
kernel body; ``import_problems`` reads which functions the linked library calls outside itself.
allowlist.py holds the rules and the pass over the source as written.
"""

from __future__ import annotations

import functools
import hashlib
import io
import re
import struct
from dataclasses import replace
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from runners import conditionals
from runners.cpplex import Token, lex
from runners.metal_sim import restrictions, spaces
from runners.metal_sim.allowlist import (
    RULES_FILE,
    Problem,
    attribute_problems,
    gnu_attribute_problems,
    pragma_problems,
    rules,
)
from runners.settings import Settings, load_settings
from runners.simbuild import Diagnostic, Vetting


@functools.lru_cache(maxsize=1)
def digest() -> str:
    """Changes whenever the rules or the checks change (part of the build cache key)."""
    here = Path(__file__).parent
    return hashlib.sha256(RULES_FILE.read_bytes() + (here / "allowlist.py").read_bytes()
                          + (here / "spaces.py").read_bytes()
                          + (here / "restrictions.py").read_bytes()
                          + (here.parent / "conditionals.py").read_bytes()
                          + (here.parent / "srcrewrite.py").read_bytes()
                          + (here.parent / "sourcetree.py").read_bytes()
                          + Path(__file__).read_bytes()).hexdigest()


_MARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"((?: \d+)*)$')


def candidate_runs(preprocessed: str, files: set[str]) -> tuple[list[tuple[str, list[int],
                                                                        str]], list[Problem]]:
    """Cut ``clang -E`` output into runs of lines from the candidate's ``files``: (file,
    the source line of each run line, the run's text); and a problem for every file the
    candidate's own text includes (a line marker with flag 1 while inside one of ``files``)."""
    runs, included = [], []
    file, line, lines, numbers = None, 0, [], []

    def close() -> None:
        if file in files and lines:
            runs.append((file, list(numbers), "\n".join(lines)))

    for raw in preprocessed.split("\n"):
        m = _MARKER.match(raw)
        if m:
            close()
            name = m[2].replace('\\"', '"').replace("\\\\", "\\")
            if file in files and "1" in m[3].split():
                included.append(Problem(file, line, "include", f"the source includes "
                                        f"{name!r}; only <metal_*> headers may be included"))
            file, line, lines, numbers = name, int(m[1]), [], []
            continue
        if file in files:
            lines.append(raw)
            numbers.append(line)
        line += 1
    close()
    # a line marker back into the same file (after a `_Pragma`, a macro spanning lines) does
    # not end its run: the checks read a function's braces as one piece
    merged: list[tuple[str, list[int], str]] = []
    for run in runs:
        if merged and merged[-1][0] == run[0]:
            last = merged.pop()
            run = (run[0], last[1] + run[1], last[2] + "\n" + run[2])
        merged.append(run)
    return merged, included


def _balance_problems(toks: list[Token], file: str) -> list[Problem]:
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for t in toks:
        if t.text in "([{" and t.kind == "punct":
            stack.append(t)
        elif t.text in ")]}" and t.kind == "punct":
            if not stack or stack[-1].text != pairs[t.text]:
                return [Problem(file, t.line, "structure", f"`{t.text}` closes what this "
                                "source did not open (code must stay inside the kernel)")]
            stack.pop()
    if stack:
        return [Problem(file, stack[-1].line, "structure", f"`{stack[-1].text}` is never "
                        "closed in this source")]
    return []


def template_header_end(toks: list[Token], k: int) -> int:
    """For ``template <...>`` at toks[k], the index of its closing `>` (else k - 1): angle
    brackets counted outside parentheses, `>>` as two."""
    if toks[k].text != "template" or k + 1 >= len(toks) or toks[k + 1].text != "<":
        return k - 1
    angles, parens = 0, 0
    for j in range(k + 1, len(toks)):
        t = toks[j].text
        parens += t in ("(", "[") and toks[j].kind == "punct"
        parens -= t in (")", "]") and toks[j].kind == "punct"
        if parens == 0:
            angles += t == "<"
            angles -= {">": 1, ">>": 2}.get(t, 0)
            if angles <= 0:
                return j
        if t in (";", "{", "}"):
            break
    return k - 1


def template_headers(toks: list[Token]) -> set[int]:
    """Indices of the tokens inside every ``template <...>`` parameter list."""
    inside: set[int] = set()
    for k, t in enumerate(toks):
        if t.text == "template":
            inside.update(range(k + 2, template_header_end(toks, k)))
    return inside


def _declaration(toks: list[Token], k: int) -> tuple[list[Token], bool]:
    """The declaration starting at toks[k], up to its `=`, `;` or body, and whether it is a
    function (a `(` after a name, at depth 0, then `;`, `{`, `const` or `noexcept`). A
    template's parameter list is read as one piece (`void (*f)(...)` in it declares no
    function)."""
    depth = 0
    for j in range(template_header_end(toks, k) + 1, len(toks)):
        t = toks[j].text
        if depth == 0 and t in ("=", ";", "{"):
            return toks[k:j], False
        if t == "(" and depth == 0 and j > k and _names_function(toks, j - 1):
            close = _matching(toks, j)
            after = toks[close + 1].text if close + 1 < len(toks) else ";"
            return toks[k:close + 1], after in (";", "{", "const", "noexcept", "[", "->")
        depth += t in "([" and toks[j].kind == "punct"
        depth -= t in ")]" and toks[j].kind == "punct"
    return toks[k:], False


# words followed by `(` in a declaration that do not make it a function
_NOT_A_NAME = {"__attribute__", "alignas", "decltype", "sizeof", "alignof", "noexcept"}


def _names_function(toks: list[Token], k: int) -> bool:
    """Whether toks[k], just before a `(`, ends a function's name: an identifier, or the `>`
    of a template-id (`template <> float4 f<float4>(float4 x)`, an explicit specialization)."""
    if toks[k].text == ">":
        open_ = spaces._open_angle(toks, k)
        k = open_ - 1 if open_ > 0 else -1
        if k < 0:
            return False
    return toks[k].kind == "identifier" and toks[k].text not in _NOT_A_NAME


def _static_ok(toks: list[Token], k: int) -> bool:
    """``static`` may declare a function or data in the constant address space, never a
    variable (Metal has no mutable program-scope storage)."""
    decl, function = _declaration(toks, k)
    start = k  # `constexpr constant static T x`: the words before `static` count too
    while start > 0 and toks[start - 1].text not in (";", "{", "}", ")"):
        start -= 1
    return function or any(t.text == "constant" for t in toks[start:k] + decl)


_CLASS_KEYS = {"struct", "class", "union", "enum"}
_TYPE_ONLY = {"template", "using", "typedef", "static_assert", "namespace", "friend"} | _CLASS_KEYS


def _program_scope_problems(toks: list[Token], file: str) -> list[Problem]:
    """Variables at namespace scope (a header, a .metal file) must be `constant` data: "program
    scope variable must reside in constant address space" (Apple's compiler)."""
    out, scopes, k = [], [], 0
    while k < len(toks):
        t = toks[k]
        if t.text == "}":
            if scopes:
                scopes.pop()
            k += 1
            continue
        if t.text in (";", "{") or any(s != "namespace" for s in scopes):
            if t.text == "{":
                scopes.append("block")
            k += 1
            continue
        if t.text == "namespace":  # namespace NAME { ... }: still namespace scope inside
            while k < len(toks) and toks[k].text not in ("{", ";"):
                k += 1
            if k < len(toks) and toks[k].text == "{":
                scopes.append("namespace")
            k += 1
            continue
        decl, function = _declaration(toks, k)
        words = {x.text for x in decl}
        end = k + max(len(decl), 1)
        if not function and words & _CLASS_KEYS and "typedef" not in words and end < len(
                toks) and toks[end].text == "{":
            # a class body: what follows its `}` up to `;` declares variables of it
            close = _matching(toks, end)
            tail = toks[close + 1:]
            stop = next((i for i, x in enumerate(tail) if x.text == ";"), len(tail))
            if any(x.kind == "identifier" for x in tail[:stop]) and "constant" not in words:
                out.append(_program_scope(file, tail[0]))
            k = close + 1 + stop + 1
            continue
        if not function and not words & _TYPE_ONLY and "constant" not in words and any(
                x.kind == "identifier" for x in decl):
            out.append(_program_scope(file, t))
        # skip to the end of this declaration (its initializer or body included)
        while end < len(toks) and toks[end].text not in (";", "{"):
            end += 1
        if end < len(toks) and toks[end].text == "{":
            end = _matching(toks, end)
            if not function:  # `= {...};` or a class body: its `;` ends it
                while end < len(toks) and toks[end].text != ";":
                    end += 1
        k = end + 1
    return out


def _matching(toks: list[Token], k: int) -> int:
    """Index of the bracket closing the one at toks[k] (the last token if none does)."""
    opening = toks[k].text
    closing = {"(": ")", "[": "]", "{": "}"}[opening]
    depth = 0
    for j in range(k, len(toks)):
        depth += toks[j].text == opening
        depth -= toks[j].text == closing
        if depth == 0:
            return j
    return len(toks) - 1


def _program_scope(file: str, t: Token) -> Problem:
    return Problem(file, t.line, "storage", "a variable at program scope must be `constant` "
                   "data (Metal has no mutable program-scope storage; Apple's compiler: "
                   "\"program scope variable must reside in constant address space\")")


# MLX's generated signature sits between a header and a body: the header's macros expand in
# it, so what they put there is checked too (its brackets open the body: no balance check)
_SIGNATURE = "mlx-signature"
_BODIES = frozenset({"source.metal"})  # a function's body, not namespace scope
_MLX_PARTS = _BODIES | {"header.metal", _SIGNATURE}  # the rest: .metal libraries


def preprocessed_problems(preprocessed: str, files: set[str]) -> list[Problem]:
    """What the allow-list refuses in the candidate's part of ``clang -E`` output."""
    r = rules()
    runs, out = candidate_runs(preprocessed, set(files) | {_SIGNATURE})
    out = [p for p in out if p.file != _SIGNATURE]
    for file, numbers, text in runs:
        lines = text.split("\n")
        for number, ln in zip(numbers, lines, strict=True):
            if ln.startswith("#pragma"):
                out += pragma_problems(lex(ln[len("#pragma"):])[0], file, number)
        code = "\n".join("" if ln.startswith("#pragma") else ln for ln in lines)
        toks = [t.on_line(numbers[t.line - 1]) for t in lex(code)[0]]
        if file != _SIGNATURE:
            out += _balance_problems(toks, file)
        if file not in _BODIES | {_SIGNATURE}:
            out += _program_scope_problems(toks, file)
        out += restrictions.problems(toks, file, whole_file=file not in _MLX_PARTS)
        # a function pointer as a template's parameter takes a function's address at compile
        # time (a cast integer is no constant expression): llama.cpp passes its dequantizers so
        headers = template_headers(toks)
        for k, t in enumerate(toks):
            if t.text in r["forbidden"]:
                out.append(Problem(file, t.line, "keyword", f"`{t.text}`: "
                                   f"{r['forbidden'][t.text]}"))
            elif t.text == "[" and k + 1 < len(toks) and toks[k + 1].text == "[":
                out += attribute_problems(toks, k, file)
            elif t.text == "__attribute__":
                out += gnu_attribute_problems(toks, k, file)
            elif t.text == "static" and not _static_ok(toks, k):
                out.append(Problem(file, t.line, "storage", "`static` variables keep state "
                                   "between threads and launches; only functions and `constant` "
                                   "data may be static"))
            elif t.text in (".*", "->*"):
                out.append(Problem(file, t.line, "function-pointer", "pointers to members are "
                                   "not allowed"))
            elif t.text == "(" and k not in headers and _function_pointer_at(toks, k):
                out.append(Problem(file, t.line, "function-pointer", "function pointers are "
                                   "not allowed in a kernel"))
    return out


def _function_pointer_at(toks: list[Token], k: int) -> bool:
    """``( * name ) (`` or ``( & name ) (`` (name optional): a pointer or reference to a
    function, as declared or called."""
    texts = [t.text for t in toks[k:k + 5]]
    if len(texts) < 4 or texts[1] not in ("*", "&"):
        return False
    j = 3 if toks[k + 2].kind == "identifier" else 2
    return len(texts) > j + 1 and texts[j] == ")" and texts[j + 1] == "("


# What a Metal kernel library may call outside itself: kport's runtime, the sanitizer hooks
# kport implements, the C library's memory copies (the compiler emits them) and libm's math
# (kport's math shim calls it).
_IMPORT_PREFIXES = ("__kp_", "__tsan_")
_IMPORTS = {"memcpy", "memmove", "memset", "memcmp", "bcmp", "__stack_chk_fail"}


@functools.lru_cache(maxsize=1)
def _libm_functions() -> frozenset[str]:
    """Functions libm exports, read from the libm this process has mapped."""
    try:
        maps = Path("/proc/self/maps").read_text().split("\n")
    except OSError:
        return frozenset()
    path = next((ln.split()[-1] for ln in maps if "/libm.so" in ln or "/libm-" in ln), None)
    if not path:
        return frozenset()
    with open(path, "rb") as f:
        table = ELFFile(f).get_section_by_name(".dynsym")
        return frozenset(s.name for s in table.iter_symbols()
                         if s["st_shndx"] != "SHN_UNDEF"
                         and s["st_info"]["type"] in ("STT_FUNC", "STT_GNU_IFUNC", "STT_LOOS"))


def import_problems(library: bytes, file: str) -> list[Problem]:
    """Calls the linked kernel library (its bytes) makes outside itself that a kernel may not
    make (the C library's ``system``, ``fopen``, ...), read from its dynamic symbol table."""
    try:
        table = ELFFile(io.BytesIO(library)).get_section_by_name(".dynsym")
        wanted = sorted({s.name for s in table.iter_symbols()
                         if s.name and s["st_shndx"] == "SHN_UNDEF"}) if table else []
    except (ELFError, ValueError, struct.error) as err:
        return [Problem(file, 0, "imports", f"the compiled kernel cannot be read ({err})")]
    libm = _libm_functions()
    bad = [n for n in wanted if not n.startswith(_IMPORT_PREFIXES) and n not in _IMPORTS
           and n not in libm]
    return [Problem(file, 0, "imports", f"the kernel would call `{n}` from the C library; "
                    "kernels may call only Metal's functions") for n in bad]


def space_problems(preprocessed: str, files: set[str]) -> list[Diagnostic]:
    """Pointer and reference types the candidate's preprocessed text writes without an
    address space (spaces.missing_space_problems; MLX's signature always has them)."""
    runs, _ = candidate_runs(preprocessed, files)
    toks = [[t.on_line(numbers[t.line - 1]) for t in lex(text)[0]]
            for _, numbers, text in runs]
    types, _ = spaces._declared_types([t for run in toks for t in run])
    return [Diagnostic(p.file, p.line, 1, "error", p.message)
            for (file, _, _), run in zip(runs, toks, strict=True)
            for p in spaces.missing_space_problems(run, file, types)]


def vetting(files: set[str], main: str, tu: str,
            pending: conditionals.Pending | None = None) -> Vetting:
    """The checks a metal_sim build runs: on ``tu`` preprocessed (the parts from ``files``:
    the candidate's text as written, before the simulator's own rewrites) and on the linked
    library (problems named after ``main``). ``pending``: the source pass's findings inside
    #if groups, which count when clang read their lines (``tu`` carries the groups' markers)."""
    def preprocessed(text: str) -> list[Diagnostic]:
        waited = []
        if pending:
            waited, text = pending.resolve(text)
        return [p.diagnostic() for p in waited + preprocessed_problems(text, files)]

    return Vetting(digest(), tu, preprocessed,
                   lambda lib: [p.diagnostic() for p in import_problems(lib, main)])


def with_address_spaces(base: Vetting, files: set[str], check_unit: str,
                        settings: Settings | None = None) -> Vetting:
    """``base`` plus MSL's address-space rules (spaces.py), run when ``base``'s pass over the
    preprocessed text finds nothing: the written types on that text, then ``check_unit``."""
    def preprocessed(text: str) -> list[Diagnostic]:
        found = base.preprocessed(text)
        if found:
            return found
        text = conditionals.without_markers(text)
        found = space_problems(text, files)
        seen = {(d.file, d.line) for d in found}
        checked = spaces.run_check(check_unit, set(files) | {_SIGNATURE},
                                   settings or load_settings())
        return found + [d for d in checked if (d.file, d.line) not in seen]

    return replace(base, preprocessed=preprocessed)
