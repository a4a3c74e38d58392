"""MSL's address-space rules, which clang's C++ does not have (issue 14).

metal_sim compiles MSL as C++ with the address-space words erased, so two passes make up for it:
- ``missing_space_problems``: every pointer or reference type the candidate writes needs an
  address space (MSL 3.1-4.0; generic pointers come with 4.1). Read from the candidate's
  preprocessed tokens (macros expanded), where a ``*``/``&`` after a type name is a declarator.
- ``run_check``: a *check unit*, the kernel again with `device`/`constant`/`threadgroup` as
  clang address spaces (kport/metal/address_spaces.h) and C-style pointer casts as
  ``__kp_ascast``, type-checked by clang (``-fsyntax-only``, in the jail). Its errors about
  address spaces are the candidate's (implicit conversions, casts across spaces, `constant`
  writes, locals in `device`); the rest are left to the real compile. Plain C++ gives a class
  object in `device` memory no copy or member call, which MSL allows: those errors are dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

from runners import srcrewrite
from runners.cpplex import Token
from runners.lifetime import temp_folder
from runners.metal_sim.allowlist import Problem
from runners.sandbox import Limits, Ran
from runners.settings import Settings
from runners.simbuild import (
    COMPILE_MEMORY,
    INCLUDE,
    PCH_FLAGS,
    PCH_REFUSED,
    Diagnostic,
    compile_jail,
    with_precompiled_prelude,
)
from runners.toolchain import Compiler, find_compiler

SPACES = frozenset({"device", "constant", "thread", "threadgroup", "threadgroup_imageblock"})
CHECK_DEFINE = "#define __KP_ADDRESS_SPACES 1\n"  # before the shims: their pointers get spaces
CHECK_HEAD = "#include <kport/metal/address_spaces.h>\n"  # after them: the MSL words
# warnings off but one: a variable-length array, a GNU extension of clang's C++ that MSL (C++14
# based) does not have
_CHECK_FLAGS = ("-std=c++20", "-fsyntax-only", "-fno-exceptions", "-fno-rtti", "-Wno-everything",
                "-Werror=vla-cxx-extension",
                "-fno-caret-diagnostics", "-fno-color-diagnostics", "-ferror-limit=200",
                f"-I{INCLUDE}")
# The prelude is precompiled with the check's flags but for output (-fsyntax-only writes none).
_PCH_BUILD_FLAGS = tuple(f for f in _CHECK_FLAGS if f != "-fsyntax-only")
_SCALARS = {"void", "bool", "char", "short", "int", "long", "float", "double", "signed",
            "unsigned", "half", "bfloat", "uint", "ushort", "uchar", "ulong", "size_t",
            "ptrdiff_t", "intptr_t", "uintptr_t", "float16_t", "bfloat16_t", "complex64_t",
            "atomic_int", "atomic_uint", "atomic_bool", "atomic_float"} | {
    f"{s}int{n}_t" for s in ("", "u") for n in (8, 16, 32, 64)}
BUILTIN_TYPES = frozenset(_SCALARS | srcrewrite.CONSTRUCTIBLE)
TYPE_TEMPLATES = frozenset({"vec", "atomic", "packed_vec", "matrix", "simdgroup_matrix"})
# a pointer/reference segment ends at these, walking back from its `*` or `&`
_STOPS = {"(", ")", ",", ";", "{", "}", "=", "[", "]", ":", "?", "*", "&", "&&", "return",
          "typedef", "using", "template", "[[", "]]", "else", "do"}
# After these a name and `*` start an expression, never a declaration.
_EXPRESSION_BEFORE = {"[", "return", "?"}


def check_text(text: str) -> str:
    """The check unit's version of MSL text (its line count unchanged): pointer casts checked,
    threadgroup storage kept in `threadgroup`, address-space words kept for the macros."""
    text = srcrewrite.check_pointer_casts(text)
    text = srcrewrite.rewrite_group_storage(text, "threadgroup", space="threadgroup")
    text = srcrewrite.mark_address_spaces(text)
    return srcrewrite.rewrite_metal_constructors(text)


def _declared_types(toks: list[Token]) -> tuple[set[str], set[str]]:
    """(type names, class-template names) the candidate declares."""
    types, templates = set(), set()
    for k, t in enumerate(toks[:-1]):
        nxt = toks[k + 1]
        if t.text in ("struct", "class", "union", "enum") and nxt.kind == "identifier":
            name = toks[k + 2].text if nxt.text in ("class", "struct") and k + 2 < len(
                toks) else nxt.text
            types.add(name)
            if any(x.text == "template" for x in toks[max(0, k - 40):k]) and _after_template(
                    toks, k):
                templates.add(name)
        elif t.text in ("typename", "class") and nxt.kind == "identifier" and k and toks[
                k - 1].text in ("<", ","):
            types.add(nxt.text)
        elif t.text == "using" and nxt.kind == "identifier" and k + 2 < len(toks) and toks[
                k + 2].text == "=":
            types.add(nxt.text)
        elif t.text == "typedef":
            depth, j = 0, k + 1
            while j < len(toks) and not (depth == 0 and toks[j].text == ";"):
                depth += toks[j].text in "([{"
                depth -= toks[j].text in ")]}"
                j += 1
            if toks[j - 1].kind == "identifier":
                types.add(toks[j - 1].text)
    return types, templates


def _after_template(toks: list[Token], k: int) -> bool:
    """Whether the class key at toks[k] closes a `template <...>` header."""
    j = k - 1
    if j < 0 or toks[j].text != ">":
        return False
    depth = 0
    while j >= 0:
        depth += toks[j].text == ">"
        depth -= toks[j].text == "<"
        if depth == 0:
            return j > 0 and toks[j - 1].text == "template"
        j -= 1
    return False


def _open_angle(toks: list[Token], k: int) -> int:
    """Index of the `<` matching the `>` at toks[k], or -1."""
    depth = 0
    for j in range(k, -1, -1):
        if toks[j].text in (";", "{", "}"):
            return -1
        depth += toks[j].text == ">"
        depth -= toks[j].text == "<"
        if depth == 0:
            return j
    return -1


def _type_ends_at(toks: list[Token], k: int, types: set[str], templates: set[str]) -> bool:
    """Whether toks[k] ends a written type (so a `*`/`&` after it is a declarator)."""
    while k >= 0 and toks[k].text in {"const", "volatile"} | SPACES:
        k -= 1
    if k < 0:
        return False
    t = toks[k]
    if t.text == ">":
        open_ = _open_angle(toks, k)
        return open_ > 0 and toks[open_ - 1].text in templates | TYPE_TEMPLATES
    if t.kind != "identifier" or t.text not in types:
        return False
    return not (k and toks[k - 1].text in (".", "->"))


def missing_space_problems(toks: list[Token], file: str, extra_types=()) -> list:
    """(file, line, message) for each pointer or reference type written without an address
    space (``auto`` deduces one, so it is left alone)."""
    types, templates = _declared_types(toks)
    types |= BUILTIN_TYPES | set(extra_types)
    out = []
    for k, t in enumerate(toks):
        if t.text not in ("*", "&") or not k or not _type_ends_at(toks, k - 1, types,
                                                                    templates):
            continue
        j, found, deduced, operator, named = k - 1, False, False, False, set()
        while j >= 0 and toks[j].text not in _STOPS:
            if toks[j].text == ">":
                open_ = _open_angle(toks, j)
                j = open_ if open_ >= 0 else j
            found |= toks[j].text in SPACES
            named |= {toks[j].text} & SPACES
            deduced |= toks[j].text in ("auto", "decltype")
            operator |= toks[j].kind == "punct" and toks[j].text not in ("::", "<", ">")
            j -= 1
        if operator or j >= 0 and toks[j].text in _EXPRESSION_BEFORE:
            continue  # `a[T * n]`, `return T * n`, `x + T * n`: a product, T being a value here
        if j >= 0 and toks[j].text in ("*", "&") and not found:
            # `T* device* p`: the words after the first `*` qualify its pointee
            found = any(x.text in SPACES for x in toks[j + 1:k])
        if len(named) > 1:  # `threadgroup thread T&`: clang's "multiple address spaces"
            out.append(Problem(file, t.line, "address-space", "multiple address spaces "
                               f"specified for type ({' and '.join(sorted(named))}): a pointer "
                               "or reference names one"))
            continue
        if not found and not deduced:
            kind = "pointer" if t.text == "*" else "reference"
            out.append(Problem(file, t.line, "address-space", f"{kind} type must have explicit "
                               "address space qualifier (device, constant, threadgroup or "
                               "thread; MSL before 4.1 has no generic pointers)"))
    return out


_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|note|"
                   r"fatal error): (?P<msg>.*)$", re.M)
_SPACE_WORDS = re.compile(r"'[^']*\b(device|constant|threadgroup|threadgroup_imageblock)\b[^']*'"
                          r"|address.space|__kp_ascast")
# plain C++ has no copies or member calls of class objects outside address space 0; MSL has
_CLASS_ARTIFACTS = re.compile(r"'this' object|object parameter|implicit (copy|move)|"
                              r"no viable overloaded '='|no viable conversion|"
                              r"no matching constructor|"
                              r"incompatible operand types \('[^'*&]*' and '[^'*&]*'\)")


def _messages(log: str) -> list[tuple[re.Match, list[str]]]:
    """Each error of the check's log with the notes that follow it."""
    found: list[tuple[re.Match, list[str]]] = []
    for m in _DIAG.finditer(log):
        if m["sev"] == "note":
            if found:
                found[-1][1].append(m["msg"])
        elif m["sev"] in ("error", "fatal error"):
            found.append((m, []))
    return found


_SPACE_NAMES = {"1": "device", "2": "constant", "3": "threadgroup", "4": "threadgroup_imageblock"}


def _readable(msg: str) -> str:
    """Types as MSL spells them: address spaces by name, kport's threadgroup aliases expanded."""
    msg = re.sub(r"'__kp_T_\w+' \(aka ('[^']*')\)", r"\1", msg)
    msg = re.sub(r"\(aka '[^']*'\)", "", msg).replace(" '", " '").replace("  ", " ")
    return re.sub(r"__attribute__\(\(address_space\((\d)\)\)\)",
                  lambda m: _SPACE_NAMES.get(m[1], m[0]), msg)


def _wording(msg: str, notes: list[str]) -> str:
    """Apple-like wording for what the check found."""
    msg, notes = _readable(msg), [_readable(n) for n in notes]
    if "__kp_ascast" in msg:
        with_ = next((re.search(r"\[with To = (.*?), From = (.*?)\]", n) for n in notes
                      if "[with To" in n), None)
        types = f" from '{with_[2]}' to '{with_[1]}'" if with_ else ""
        return (f"C-style cast{types} changes the address space of the pointer; MSL casts a "
                "pointer only within its address space")
    if "automatic variable qualified with an address space" in msg:
        return ("variables declared in a function must be in the thread address space "
                "(threadgroup arrays only in a kernel; constant only at program scope): " + msg)
    for n in notes:
        if "address space" in n and "'this'" not in n:
            return f"{msg} ({n})"
    return msg


_VLA = re.compile(r"variable length arrays in C\+\+")


def check_diagnostics(log: str, files: set[str]) -> list[Diagnostic]:
    """The errors of the check's ``log`` that are the candidate's: address spaces, and
    variable-length arrays (C++14 [dcl.array]: an array bound is a constant expression)."""
    out = []
    for m, notes in _messages(log):
        text = m["msg"] + "\n" + "\n".join(notes)
        if m["file"] not in files:
            continue
        if _VLA.search(m["msg"]):
            message = ("variable length arrays are not supported in Metal: MSL is C++14, where "
                       "an array's size is a constant expression (use a template argument or a "
                       "fixed maximum)")
        elif _SPACE_WORDS.search(text) and not _CLASS_ARTIFACTS.search(text):
            message = _wording(m["msg"], notes)
        else:
            continue
        out.append(Diagnostic(m["file"], int(m["line"]), int(m["col"]), "error", message))
    return out


def _command(settings: Settings) -> list[str]:
    compiler = find_compiler(settings.cxx)
    if compiler.zig:  # zig's c++ driver cannot -fsyntax-only; its clang can
        zig = Path(compiler.command[0])
        return [str(zig), "clang", "-x", "c++", "-ffreestanding", "-isystem",
                str(zig.parent / "lib" / "include")]
    return [*compiler.command, "-x", "c++"]


def run_check(unit: str, files: set[str], settings: Settings) -> list[Diagnostic]:
    """Type-check the check ``unit`` in the jail; its address-space errors in ``files``. The
    unit's prelude (its kport includes) is read precompiled, as kernel builds read theirs
    (simbuild.with_precompiled_prelude): most of the check's time was parsing those headers."""
    compiler, command = find_compiler(settings.cxx), _command(settings)
    ran = with_precompiled_prelude(
        compiler, list(_PCH_BUILD_FLAGS), unit, settings,
        lambda text, pch: _checked(compiler, command, text, pch, settings),
        refused=lambda r: not r.timed_out and PCH_REFUSED.search(r.output) is not None,
        command=command)
    if ran.timed_out:
        return [Diagnostic("kernel", 0, 0, "error", "the address-space check timed out after "
                           f"{settings.compile_timeout:g} s (KPORT_COMPILE_TIMEOUT)")]
    return check_diagnostics(ran.output, files)


def _checked(compiler: Compiler, command: list[str], text: str, pch: Path | None,
             settings: Settings) -> Ran:
    """The jailed syntax check of ``text`` (with ``pch`` read first when given)."""
    with temp_folder("kport-spaces-") as tmp:
        scratch = Path(tmp)
        (scratch / "check.cpp").write_text(text)
        reads = [*PCH_FLAGS, "-include-pch", str(pch)] if pch is not None else []
        return compile_jail(compiler, scratch, pch).run(
            [*command, *_CHECK_FLAGS, *reads, "check.cpp"], cwd=scratch,
            timeout=settings.compile_timeout, settings=settings,
            limits=Limits(memory=COMPILE_MEMORY, file_size=1 << 20,
                          cpu_seconds=int(settings.compile_timeout * 2) + 5))
