"""Reading a source's macros the way the translator needs before tree-sitter parses it:
macros that stand for qualifiers or attributes are blanked (``GGML_API``, ``__restrict__``
spellings), and one-line uses of macros whose body leaves a bracket open are expanded
(llama.cpp's ``GGML_TABLE_BEGIN``). Offsets and lines are kept, so every node still points at
its place in the file."""

from __future__ import annotations

import re

# What a macro may stand for and still be read as a qualifier (llama.cpp's
# `#define GGML_CUDA_RESTRICT __restrict__`): its uses are blanked before the source is parsed.
QUALIFIER_WORDS = {"__restrict__", "__restrict", "restrict", "const", "volatile", "__device__",
                   "__host__", "__forceinline__", "__inline__", "inline", "__noinline__",
                   "static"}
_COMMENT = re.compile(r"//.*|/\*.*?\*/")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\(?)([^\n]*)$", re.M)


def defined_macros(src: str) -> set[str]:
    """The name of every ``#define`` in ``src``."""
    return {m[1] for m in _DEFINE.finditer(src)}


# attribute spellings a declaration macro may stand for (GGML_API is `__attribute__
# ((visibility ("default"))) extern`, GGML_NORETURN `[[noreturn]]`)
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*(?:\([^()]*\))*[^()]*\))*\)\)"
                        r"|__declspec\s*\((?:[^()]|\([^()]*\))*\)|\[\[[^\]]*\]\]")
_DECLARATION_WORDS = QUALIFIER_WORDS | {"extern", "_Noreturn", "__noinline__"}


def _only_qualifiers(body: str) -> bool:
    return set(_ATTRIBUTE.sub(" ", _COMMENT.sub(" ", body)).split()) <= _DECLARATION_WORDS


def blank_qualifier_macros(src: str) -> str:
    """``src`` with each use of a macro that stands only for qualifiers, attributes or nothing
    replaced by spaces (offsets and lines kept), so that ``const float * RESTRICT x`` parses
    as the parameter ``x`` and ``GGML_API float f(float);`` as a declaration; a function-like
    one (``GGML_ATTRIBUTE_FORMAT(3, 4)``) is blanked with its arguments. The ``#define``
    lines stay."""
    names = [m[1] for m in _DEFINE.finditer(src) if not m[2] and _only_qualifiers(m[3])]
    calls = [m[1] for m in _DEFINE.finditer(src) if m[2] and ")" in m[3]
             and _only_qualifiers(m[3].split(")", 1)[1])]
    # a name also defined otherwise (in another #if branch kept by a plain read) stays
    others = {m[1] for m in _DEFINE.finditer(src) if not (
        (not m[2] and _only_qualifiers(m[3])) or (m[2] and ")" in m[3]
                                                  and _only_qualifiers(m[3].split(")", 1)[1])))}
    names = [n for n in names if n not in others]
    calls = [n for n in calls if n not in others]
    if not names and not calls:
        return src
    uses = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") if names else None
    call_uses = re.compile(r"\b(" + "|".join(map(re.escape, calls)) + r")\s*\(") \
        if calls else None
    out = []
    for line in src.split("\n"):
        if _DEFINE.match(line):
            out.append(line)
            continue
        if uses is not None:
            line = uses.sub(lambda m: " " * len(m[0]), line)
        if call_uses is not None:
            for m in reversed(list(call_uses.finditer(line))):
                end = _call_end(line, m.end() - 1)
                if end > 0:
                    line = line[:m.start()] + " " * (end - m.start()) + line[end:]
        out.append(line)
    return "\n".join(out)


_FUNCTION_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)"
                             r"((?:[^\n]*\\\n)*[^\n]*)$", re.M)


def _balanced(text: str) -> bool:
    return all(text.count(a) == text.count(b) for a, b in ("{}", "()", "[]"))


def _call_end(line: str, start: int) -> int:
    """The index after the ``)`` closing the ``(`` at ``start``; -1 when the line ends first."""
    depth = 0
    for i in range(start, len(line)):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            return i + 1
    return -1


def expand_unbalanced_macros(src: str) -> str:
    """``src`` with each one-line use of a function-like macro whose body opens or closes a
    brace, bracket or parenthesis it does not close or open (llama.cpp's
    ``GGML_TABLE_BEGIN(type, name, size)`` ... ``GGML_TABLE_END()`` around its tables)
    replaced by the body, its parameters substituted: no parser can read such uses as
    written. Lines are kept; the ``#define`` lines stay; a body with ``#`` or ``##`` is left."""
    macros = {}
    for m in _FUNCTION_MACRO.finditer(src):
        body = " ".join(part.rstrip("\\").strip() for part in m[3].split("\n"))
        body = _COMMENT.sub(" ", body).strip()
        if not _balanced(body) and "#" not in body:
            macros[m[1]] = ([p.strip() for p in m[2].split(",") if p.strip()], body)
    if not macros:
        return src
    use = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\s*\(")
    out = []
    for line in src.split("\n"):
        if not line.lstrip().startswith("#"):
            pos = 0
            while m := use.search(line, pos):
                end = _call_end(line, m.end() - 1)
                if end < 0:
                    break
                params, body = macros[m[1]]
                args = split_template_args(line[m.end():end - 1]) if params else []
                if len(args) != len(params):
                    pos = end
                    continue
                for param, arg in zip(params, args, strict=True):
                    body = re.sub(rf"\b{re.escape(param)}\b", lambda _, a=arg: a, body)
                line = line[:m.start()] + body + line[end:]
                pos = m.start() + len(body)
        out.append(line)
    return "\n".join(out)


# A function parameter, with or without a default value (`const int off = 0`).


def split_template_args(text: str) -> list[str]:
    """The arguments of ``<...>`` text split at its top-level commas only:
    ``Traits<64, 4, float>, 2`` is two arguments."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [a for a in out if a]
