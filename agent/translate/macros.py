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


def _call_kind(params: str, body: str) -> int | None:
    """For a function-like macro: -1 when its body is only qualifiers and attributes (a use
    is blanked), k when it is its k-th parameter plus such words (``GGML_DEPRECATED(func,
    hint)`` is ``func __attribute__((deprecated(hint)))``: a use reads as its first argument),
    else None."""
    if _only_qualifiers(body):
        return -1
    names = [p.strip() for p in params.split(",")]
    words = _ATTRIBUTE.sub(" ", _COMMENT.sub(" ", body)).split()
    kept = [w for w in words if w not in _DECLARATION_WORDS]
    return names.index(kept[0]) if len(kept) == 1 and kept[0] in names else None


def blank_qualifier_macros(src: str) -> str:
    """``src`` with each use of a macro that stands only for qualifiers, attributes or nothing
    replaced by spaces (offsets and lines kept), so that ``const float * RESTRICT x`` parses
    as the parameter ``x`` and ``GGML_API float f(float);`` as a declaration; a function-like
    one (``GGML_ATTRIBUTE_FORMAT(3, 4)``) is blanked with its arguments, and one that is an
    argument plus attributes (``GGML_DEPRECATED(decl, "hint")``, over several lines) keeps that
    argument where it was. The ``#define`` lines stay."""
    kinds: dict[str, int | None] = {}
    device = set()  # `#define DS_D_INLINE __device__ __forceinline__`: a use still says so
    for m in _DEFINE.finditer(src):
        if not m[2]:
            kind = -2 if _only_qualifiers(m[3]) else None  # -2: an object-like qualifier
            if "__device__" in m[3].split() and len(m[1]) >= len("__device__"):
                device.add(m[1])
        elif ")" in m[3]:
            params, body = m[3].split(")", 1)
            kind = _call_kind(params, body)
        else:
            kind = None
        # a name also defined otherwise (in another #if branch a plain read keeps) stays
        kinds[m[1]] = kind if kinds.get(m[1], kind) == kind else None
    names = [n for n, k in kinds.items() if k == -2]
    calls = {n: k for n, k in kinds.items() if k is not None and k >= -1}
    if not names and not calls:
        return src
    defines = [(m.start(), m.end()) for m in _DEFINE.finditer(src)]
    out = list(src)

    def in_define(pos: int) -> bool:
        return any(a <= pos < b for a, b in defines)

    if names:
        for m in re.finditer(r"\b(" + "|".join(map(re.escape, names)) + r")\b", src):
            if not in_define(m.start()):
                word = "__device__" if m[1] in device else ""
                out[m.start():m.end()] = word.ljust(m.end() - m.start())
    if calls:
        for m in re.finditer(r"\b(" + "|".join(map(re.escape, calls)) + r")\s*\(", src):
            if in_define(m.start()):
                continue
            end = call_end(src, m.end() - 1)
            if end < 0:
                continue
            kind = calls[m[1]]
            keep = None
            if kind >= 0:
                args = arg_spans(src, m.end(), end - 1, "()[]{}")
                keep = args[kind] if kind < len(args) else None
            for i in range(m.start(), end):
                if keep is None or not keep[0] <= i < keep[1]:
                    out[i] = "\n" if src[i] == "\n" else " "
    return "".join(out)


_FUNCTION_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)"
                             r"((?:[^\n]*\\\n)*[^\n]*)$", re.M)


def _balanced(text: str) -> bool:
    return all(text.count(a) == text.count(b) for a, b in ("{}", "()", "[]"))


def call_end(line: str, start: int) -> int:
    """The index after the ``)`` closing the ``(`` at ``start``; -1 when the text ends first."""
    depth = 0
    for i in range(start, len(line)):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            return i + 1
    return -1


def expand_unbalanced_macros(src: str, launches: bool = False) -> str:
    """``src`` with each one-line use of a function-like macro whose body opens or closes a
    brace, bracket or parenthesis it does not close or open (llama.cpp's
    ``GGML_TABLE_BEGIN(type, name, size)`` ... ``GGML_TABLE_END()`` around its tables)
    replaced by the body, its parameters substituted: no parser can read such uses as
    written. Lines are kept; the ``#define`` lines stay; a body with ``#`` or ``##`` is left.
    ``launches``: macros whose body launches a kernel (``<<<``: vLLM's
    ``LAUNCH_ACTIVATION_GATE_KERNEL(KERNEL)``) are expanded too, for the host-launch reader."""
    macros = {}
    for m in _FUNCTION_MACRO.finditer(src):
        body = " ".join(_COMMENT.sub(" ", part.rstrip("\\")).strip()
                        for part in m[3].split("\n")).strip()
        if (not _balanced(body) or launches and "<<<" in body) and "#" not in body:
            macros[m[1]] = ([p.strip() for p in m[2].split(",") if p.strip()], body)
    if not macros:
        return src
    use = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\s*\(")
    out = []
    for line in src.split("\n"):
        if not line.lstrip().startswith("#"):
            pos = 0
            while m := use.search(line, pos):
                end = call_end(line, m.end() - 1)
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


def arg_spans(text: str, start: int = 0, end: int | None = None,
              brackets: str = "<>()[]{}") -> list[tuple[int, int]]:
    """The (start, end) of each argument of ``text[start:end]``, split at the commas outside
    every pair of ``brackets`` (opening, closing, ...)."""
    opening, closing = brackets[0::2], brackets[1::2]
    end = len(text) if end is None else end
    out, depth, first = [], 0, start
    for i in range(start, end):
        ch = text[i]
        if ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
        elif ch == "," and depth == 0:
            out.append((first, i))
            first = i + 1
    return [*out, (first, end)]


def split_template_args(text: str, brackets: str = "<>()[]{}") -> list[str]:
    """The arguments of ``<...>`` text split at its top-level commas only:
    ``Traits<64, 4, float>, 2`` is two arguments. A call's arguments take
    ``brackets="()[]{}"`` (``a > b`` is a comparison there, not a closing bracket)."""
    return [a for a in (text[i:j].strip() for i, j in arg_spans(text, brackets=brackets)) if a]


def template_parts(name: str) -> tuple[str, list[str]]:
    """(``k``, its template arguments) of a kernel named ``k<a, b>``; [] when it has none."""
    base, _, rest = name.partition("<")
    rest = rest.strip()
    return base.strip(), split_template_args(rest[:-1]) if rest.endswith(">") else []
