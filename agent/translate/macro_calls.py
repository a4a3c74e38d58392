"""Uses of a user's function-like macro that spells CUDA, expanded where they are written:
vLLM's ``#define VLLM_LDG(arg) __ldg(arg)`` used as ``VLLM_LDG(&x[i])`` becomes
``__ldg(&x[i])``, so the builtin is translated like any other call (in a ``#define`` it cannot
be: the translator sees it only where it runs). Expansion follows the C preprocessor:
arguments split at top-level commas of parentheses only, expanded first, substituted as
written, the result rescanned with the macro itself off. Lines are kept (a use over several
lines leaves its line breaks after the expansion). Other macros stay as the user wrote them:
Metal's preprocessor reads them the same way."""

from __future__ import annotations

import bisect
import functools
import re

from agent.translate.macros import arg_spans, call_end
from kb.rewrites import load_rewrites

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)"
                     r"((?:[^\n]*\\\n)*[^\n]*)$", re.M)
# what the expansion must not touch: comments, string and character literals, directives
_SKIP = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"
                   r"|^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M | re.S)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_WORD = re.compile(r"[A-Za-z_]\w*")


@functools.cache
def _cuda_names() -> frozenset[str]:
    """The CUDA spellings the translator rewrites (kb/rules/rewrites.toml)."""
    table = load_rewrites()
    return frozenset(table.call_names() | set(table.idents) | set(table.tokens)
                     | set(table.atomics))


def _spells_cuda(word: str) -> bool:
    # `__` names are CUDA's (or the compiler's): the rewrite table or a counted TODO has them
    return word in _cuda_names() or word.startswith("__") and word != "__VA_ARGS__"


def expandable_macros(src: str) -> dict[str, tuple[list[str], str]]:
    """name -> (parameters, body) of each function-like ``#define`` in ``src`` whose body is
    balanced, has no ``#``/``##`` and names CUDA, itself or through another such macro; a
    name defined twice is left out (which definition holds is the preprocessor's call)."""
    found: dict[str, tuple[list[str], str]] = {}
    twice: set[str] = set()
    for m in _DEFINE.finditer(src):
        body = _COMMENT.sub(" ", " ".join(p.rstrip("\\").strip() for p in m[3].split("\n")))
        params = [p.strip() for p in m[2].split(",") if p.strip()]
        if m[1] in found and found[m[1]] != (params, body.strip()):
            twice.add(m[1])
        found[m[1]] = (params, body.strip())
    usable = {n: (p, b) for n, (p, b) in found.items() if n not in twice and "#" not in b
              and all(b.count(a) == b.count(z) for a, z in ("()", "[]", "{}"))
              and all(x.isidentifier() or x == "..." for x in p)}
    wanted = {n for n, (_, b) in usable.items() if any(map(_spells_cuda, _WORD.findall(b)))}
    grew = True
    while grew:  # a macro calling a wanted one is wanted too
        more = {n for n, (_, b) in usable.items() if n not in wanted
                and set(_WORD.findall(b)) & wanted}
        wanted |= more
        grew = bool(more)
    return {n: usable[n] for n in wanted}


def _expand(text: str, macros: dict, off: frozenset[str]) -> str:
    """``text`` (code: no comments or literals that matter) with every use of ``macros``
    outside ``off`` expanded, recursively."""
    names = [n for n in macros if n not in off]
    if not names:
        return text
    use = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\s*\(")
    out, pos = [], 0
    while m := use.search(text, pos):
        end = call_end(text, m.end() - 1)
        got = _expansion(text[m.end():end - 1], m[1], macros, off) if end > 0 else None
        if got is None:
            out.append(text[pos:m.end()])
            pos = m.end()
            continue
        out.append(text[pos:m.start()] + got)
        pos = end
    return "".join(out) + text[pos:]


def _expansion(inner: str, name: str, macros: dict, off: frozenset[str]) -> str | None:
    """One use's replacement, its arguments ``inner``; None when the count does not match."""
    params, body = macros[name]
    args = [inner[i:j].strip() for i, j in arg_spans(inner, brackets="()")]
    if not params and args == [""]:
        args = []
    variadic = bool(params) and params[-1] == "..."
    if len(args) < len(params) - variadic or (not variadic and len(args) != len(params)):
        return None
    args = [_expand(a, macros, off) for a in args]
    values = dict(zip(params, args, strict=False))
    if variadic:
        values.pop("...", None)
        values["__VA_ARGS__"] = ", ".join(args[len(params) - 1:])
    filled = re.sub(r"\b[A-Za-z_]\w*\b", lambda w: values.get(w[0], w[0]), body)
    return _expand(filled, macros, off | {name})


def expand_macro_calls(src: str) -> str:
    """``src`` with each use (outside directives, comments and literals) of a function-like
    macro that names CUDA (expandable_macros) replaced by its expansion; a use whose argument
    count does not match, or the name used without a call, stays (and the ``#define`` with
    it: the emitter counts the CUDA behind it as a TODO). Lines are kept."""
    macros = expandable_macros(src)
    if not macros:
        return src
    use = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\s*\(")
    skipped = [(m.start(), m.end()) for m in _SKIP.finditer(src)]
    starts = [a for a, _ in skipped]
    out, pos = [], 0
    for m in use.finditer(src):
        k = bisect.bisect_right(starts, m.start()) - 1
        if m.start() < pos or k >= 0 and m.start() < skipped[k][1]:
            continue
        end = call_end(src, m.end() - 1)
        if end < 0:
            continue
        span = src[m.end():end - 1]
        inner = re.sub(r"\s*\n\s*", " ", _COMMENT.sub(" ", span))
        got = _expansion(inner, m[1], macros, frozenset())
        if got is None:
            continue
        out.append(src[pos:m.start()] + got + "\n" * span.count("\n"))
        pos = end
    return "".join(out) + src[pos:]
