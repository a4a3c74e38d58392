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
import re
from dataclasses import replace
from pathlib import Path

from runners.cpplex import Token, lex
from runners.metal_sim.allowlist import (
    RULES_FILE,
    Problem,
    attribute_problems,
    gnu_attribute_problems,
    rules,
)
from runners.simbuild import Vetting


@functools.lru_cache(maxsize=1)
def digest() -> str:
    """Changes whenever the rules or the checks change (part of the build cache key)."""
    here = Path(__file__).parent
    return hashlib.sha256(RULES_FILE.read_bytes() + (here / "allowlist.py").read_bytes()
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
    return runs, included


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


def _static_ok(toks: list[Token], k: int) -> bool:
    """``static`` may start a constant or a function definition, never a variable."""
    nxt = toks[k + 1].text if k + 1 < len(toks) else ""
    if nxt in ("inline", "constexpr", "constant", "const", "__attribute__"):
        return True
    depth = 0
    for j in range(k + 1, len(toks)):
        t = toks[j].text
        if t in ("=", ";", "{", "[") and depth == 0:
            return False
        if t == "(":
            if depth == 0 and toks[j - 1].kind == "identifier":
                close, d2 = j, 0
                for close in range(j, len(toks)):
                    d2 += {"(": 1, ")": -1}.get(toks[close].text, 0)
                    if d2 == 0:
                        break
                rest = [x.text for x in toks[close + 1:close + 4]]
                return "{" in rest[:3] and all(x in ("{", "const", "noexcept") for x in
                                                   rest[:rest.index("{")])
            depth += 1
        elif t == ")":
            depth -= 1
    return False


def preprocessed_problems(preprocessed: str, files: set[str]) -> list[Problem]:
    """What the allow-list refuses in the candidate's part of ``clang -E`` output."""
    r = rules()
    runs, out = candidate_runs(preprocessed, files)
    for file, numbers, text in runs:
        lines = text.split("\n")
        for number, ln in zip(numbers, lines, strict=True):
            if ln.startswith("#pragma"):
                body = " ".join(t.text for t in lex(ln[len("#pragma"):])[0])
                if not any(p.match(body) for p in r["pragma_res"]):
                    out.append(Problem(file, number, "pragma", f"#pragma {body} is not allowed"))
        code = "\n".join("" if ln.startswith("#pragma") else ln for ln in lines)
        toks = [replace(t, line=numbers[t.line - 1]) for t in lex(code)[0]]
        out += _balance_problems(toks, file)
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
                                   "between threads and launches; only constants and functions "
                                   "may be static"))
            elif t.text in (".*", "->*"):
                out.append(Problem(file, t.line, "function-pointer", "pointers to members are "
                                   "not allowed"))
            elif t.text == "(" and _function_pointer_at(toks, k):
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
    from elftools.elf.elffile import ELFFile

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


def import_problems(library: Path, file: str) -> list[Problem]:
    """Calls the linked kernel library makes outside itself that a kernel may not make (the C
    library's ``system``, ``fopen``, ...), read from its dynamic symbol table."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(library, "rb") as f:
            table = ELFFile(f).get_section_by_name(".dynsym")
            wanted = sorted({s.name for s in table.iter_symbols()
                             if s.name and s["st_shndx"] == "SHN_UNDEF"}) if table else []
    except (OSError, ELFError) as err:
        return [Problem(file, 0, "imports", f"the compiled kernel cannot be read ({err})")]
    libm = _libm_functions()
    bad = [n for n in wanted if not n.startswith(_IMPORT_PREFIXES) and n not in _IMPORTS
           and n not in libm]
    return [Problem(file, 0, "imports", f"the kernel would call `{n}` from the C library; "
                    "kernels may call only Metal's functions") for n in bad]


def vetting(files: set[str], main: str, tu: str) -> Vetting:
    """The checks a metal_sim build runs: on ``tu`` preprocessed (the parts from ``files``:
    the candidate's text as written, before the simulator's own rewrites) and on the linked
    library (problems named after ``main``)."""
    return Vetting(digest(), tu,
                   lambda text: [p.diagnostic() for p in preprocessed_problems(text, files)],
                   lambda lib: [p.diagnostic() for p in import_problems(lib, main)])


