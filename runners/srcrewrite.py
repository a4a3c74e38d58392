"""Token-level source rewrites that make Metal and CUDA kernel source compile as C++.

tree-sitter-cpp tokenizes (so comments and strings are never touched); the rewrites work on the
token stream because Metal's address spaces make the C++ parse unreliable. Every rewrite keeps
the number of newlines, so compiler diagnostics still point at the user's lines.

- ``threadgroup T x[N];`` / ``__shared__ T x[N];`` -> a reference to storage of the running group
  from ``__kp_tg_alloc`` (one per declaration and template instantiation).
- ``extern __shared__ T x[];`` -> a pointer to the launch's dynamic shared memory.
- Metal address-space words in types vanish; vector/matrix constructors and casts become
  ``__kp::make<V>(...)`` / ``__kp::convert<V>(...)`` (clang has no Metal-style constructors).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from runners.errors import KportError
from runners.sourcetree import LITERALS, leaves, parse

ADDRESS_SPACES = {"device", "constant", "thread", "threadgroup", "threadgroup_imageblock"}
_SCALARS = ["float", "half", "bfloat", "int", "uint", "short", "ushort", "char", "uchar",
            "long", "ulong", "bool"]
VECTOR_TYPES = {f"{s}{n}" for s in _SCALARS for n in (2, 3, 4)}
VECTOR_TYPES |= {f"packed_{s}{n}" for s in _SCALARS for n in (2, 3, 4)}
MATRIX_TYPES = {f"{s}{c}x{r}" for s in ("float", "half", "bfloat") for c in (2, 3, 4)
                for r in (2, 3, 4)}
CONSTRUCTIBLE = VECTOR_TYPES | MATRIX_TYPES
# A concatenation of literals (``"%d" PRId64 "\n"``) is one token here (kb/parse.py keeps its
# pieces): to the rewrites it is one literal, and no edit lands inside it.
_WHOLE = LITERALS | {"concatenated_string"}


class SourceError(KportError):
    """A construct the rewrite cannot handle; names the construct and its line."""


@dataclass(frozen=True, slots=True)
class Tok:
    text: str
    start: int
    end: int
    line: int  # 1-based
    kind: str


def tokenize(src: str) -> list[Tok]:
    """Leaf tokens of ``src`` (byte offsets into its UTF-8 encoding), comments excluded."""
    return list(_tokens(src))


# A build checks and rewrites one source several times over (a 330 KB ggml library: 8 parses
# of 0.4 s, 5 of them of a text parsed before); the tokens of the last few are kept.
@functools.lru_cache(maxsize=8)
def _tokens(src: str) -> tuple[Tok, ...]:
    data = src.encode()
    return tuple(Tok(data[n.start_byte:n.end_byte].decode(errors="replace"), n.start_byte,
                     n.end_byte, n.start_point[0] + 1, n.type)
                 for n in leaves(parse(data, "cpp"), _WHOLE))


class _Editor:
    """Collects non-overlapping replacements; applies them keeping every newline."""

    def __init__(self, src: str):
        self.data = src.encode()
        self.edits: list[tuple[int, int, str]] = []

    def replace(self, start: int, end: int, text: str) -> None:
        missing = self.data[start:end].count(b"\n") - text.count("\n")
        self.edits.append((start, end, text + "\n" * max(0, missing)))

    def result(self) -> str:
        out, pos = [], 0
        for start, end, text in sorted(self.edits):
            if start < pos:
                continue  # overlapping edit: the earlier one wins
            out.append(self.data[pos:start])
            out.append(text.encode())
            pos = end
        out.append(self.data[pos:])
        return b"".join(out).decode()


def _statement_end(toks: list[Tok], i: int) -> int:
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif t == ";" and depth == 0:
            return j
    raise SourceError(f"line {toks[i].line}: declaration without a closing ';'")


_DECL_PREFIX = {"static", "extern", "volatile", "const", "inline"}


def _storage_statement(toks: list[Tok], i: int) -> tuple[int, int] | None:
    """(first, last) token indices of the storage declaration whose storage word is toks[i], or
    None when the word qualifies a pointer/reference type, a parameter or a cast."""
    start = i
    while start > 0 and toks[start - 1].text in _DECL_PREFIX:
        start -= 1
    if start > 0 and toks[start - 1].text in ("(", ",", "<", ")"):
        return None  # a parameter, a template argument, or a member function's qualifier
    depth = 0
    for j in range(i + 1, len(toks)):
        t = toks[j].text
        if t in "([{":
            depth += 1
        elif t in ")]}":
            if depth == 0:
                return None
            depth -= 1
        elif depth == 0 and t in ("*", "&", "&&"):
            return None
        elif depth == 0 and t == ";":
            return start, j
    return None


def _split_top(toks: list[Tok], sep: str) -> list[list[Tok]]:
    parts, depth, cur = [], 0, []
    for t in toks:
        if t.text in "([{<":
            depth += 1
        elif t.text in ")]}>":
            depth -= 1
        if t.text == sep and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    return parts


def function_params(toks: list[Tok], name: str, marker: str,
                    lookback: int = 12) -> list[list[Tok]] | None:
    """Tokens of each parameter of the first function ``name`` whose declaration has ``marker``
    (``__global__``, ``kernel``) among the ``lookback`` tokens before its name; None if absent."""
    for i, t in enumerate(toks[:-1]):
        if t.text != name or toks[i + 1].text != "(":
            continue
        if not any(x.text == marker for x in toks[max(0, i - lookback):i]):
            continue
        depth, j = 0, i + 1
        for j in range(i + 1, len(toks)):
            depth += toks[j].text == "("
            depth -= toks[j].text == ")"
            if depth == 0:
                break
        return _split_top(toks[i + 2:j], ",")
    return None


def _join(toks: list[Tok]) -> str:
    out = ""
    for t in toks:
        if out and (out[-1].isalnum() or out[-1] == "_") and (t.text[0].isalnum() or
                                                               t.text[0] == "_"):
            out += " "
        out += t.text
    return out


_ALIGN = re.compile(r"(?:alignas\s*\(\s*(\d+)\s*\)|__align__\s*\(\s*(\d+)\s*\)|"
                    r"__attribute__\s*\(\s*\(\s*aligned\s*\(\s*(\d+)\s*\)\s*\)\s*\))")


def _group_storage_decl(toks: list[Tok], word: str, scope_is_file: bool, space: str = "") -> str:
    """Replacement text for one ``threadgroup``/``__shared__`` declaration statement; ``space``
    (metal_sim's address-space check) keeps the variable's address space in its type."""
    line = toks[0].line
    text = _join(toks)
    align = next((int(g) for m in _ALIGN.finditer(text) for g in m.groups() if g), 0)
    body = [t for t in toks[:-1] if t.text not in (word, "static")]
    is_extern = bool(body) and body[0].text == "extern"
    body = _drop_align(body[1:] if is_extern else body)
    body, defined = _class_defined_in(body)
    cut = _declarator_start(body)
    if cut < 2 or body[cut - 1].kind != "identifier" or any(t.text == "=" for t in body):
        raise SourceError(f"line {line}: cannot handle this {word} declaration: `{text}`; "
                          "declare variables without an initializer")
    type_ = _join(body[:cut - 1])
    out = [defined] if defined else []
    for decl in _split_top(body[cut - 1:], ","):
        name, dims = decl[0].text, _join(decl[1:])
        if is_extern:
            if dims != "[]":
                raise SourceError(f"line {line}: extern {word} `{name}` must be an unsized array")
            out.append(f"static __thread {type_}* {name}; static int __kp_dyn_{name} = "
                       f"__kp_register_dyn_smem([]() -> void** {{ return (void**)&{name}; }});"
                       if scope_is_file else
                       # a reference to the array, as in CUDA: reinterpret_cast<S&>(smem)
                       # (Mamba's TempStorage) must alias the memory, not a pointer variable
                       f"{type_} (&{name})[] = *reinterpret_cast<{type_} (*)[]>(__kp_dyn_smem());")
            continue
        if scope_is_file:
            raise SourceError(f"line {line}: file-scope {word} variable `{name}` is not "
                              "supported; declare it inside the kernel")
        if dims.endswith("[]"):
            raise SourceError(f"line {line}: {word} array `{name}` needs a size")
        alias = f"__kp_T_{name}"
        align_arg = f"{align}" if align else f"alignof({alias})"
        # a C-style cast: only it may turn kport's storage into threadgroup memory
        cast = f"({alias}*)" if space else f"reinterpret_cast<{alias}*>"
        out.append(f"using {alias} = {space + ' ' if space else ''}{type_}{dims}; static char "
                   f"__kp_site_{name}; {alias}& {name} = *{cast}(__kp_tg_alloc(&__kp_site_{name}"
                   f", sizeof({alias}), {align_arg}, \"{name}\", {line}));")
    return " ".join(out)


def _declarator_start(body: list[Tok]) -> int:
    """Index of the first `[`, `,` or `=` outside template arguments (the end of the type and
    the first name: ``typename cub::WarpReduce<float, 8>::TempStorage rs[4]``), or len(body)."""
    depth = 0
    for k, t in enumerate(body):
        if t.text == "<" and k and body[k - 1].kind in ("identifier", "type_identifier"):
            depth += 1
        elif t.text in (">", ">>") and depth:
            depth = max(0, depth - len(t.text))
        elif depth == 0 and t.text in ("[", ",", "="):
            return k
    return len(body)


def _class_defined_in(body: list[Tok]) -> tuple[list[Tok], str]:
    """A class defined in the declaration (``__shared__ union { ... } temp_storage;``, as in
    CUB's examples): ``body`` with the class replaced by its tag (``__kp_U_<name>`` when it has
    none), and the class's definition ("" when there is none)."""
    open_ = next((k for k, t in enumerate(body) if t.text == "{"), None)
    if open_ is None:
        return body, ""
    depth, close = 0, len(body) - 1
    for k in range(open_, len(body)):
        depth += body[k].text == "{"
        depth -= body[k].text == "}"
        if depth == 0:
            close = k
            break
    head, rest = body[:open_], body[close + 1:]
    named = len(head) > 1 and head[-1].kind in ("identifier", "type_identifier")
    tag = head[-1].text if named else "__kp_U_" + next(
        (t.text for t in rest if t.kind == "identifier"), "storage")
    definition = f"{_join(head)}{'' if named else ' ' + tag} {_join(body[open_:close + 1])};"
    return [Tok(tag, body[open_].start, body[close].end, body[open_].line, "identifier"),
            *rest], definition


def _drop_align(toks: list[Tok]) -> list[Tok]:
    """Remove alignas(...)/__align__(...)/__attribute__((...)) groups from a token list."""
    out, i = [], 0
    while i < len(toks):
        if toks[i].text in ("alignas", "__align__", "__attribute__") and i + 1 < len(toks) and \
                toks[i + 1].text == "(":
            depth, i = 0, i + 1
            while i < len(toks):
                depth += toks[i].text == "("
                depth -= toks[i].text == ")"
                i += 1
                if depth == 0:
                    break
            continue
        out.append(toks[i])
        i += 1
    return out


def _opens_no_body(toks: list[Tok], i: int) -> bool:
    """Whether the `{` at toks[i] opens a namespace, `extern "C"`, class or initializer rather
    than a function body."""
    prev = [x.text for x in toks[max(0, i - 3):i]]
    return any(p in ("namespace", '"C"', "struct", "class", "union", "enum") for p in prev) or (
        bool(prev) and prev[-1] == "=")


def _scopes(toks: list[Tok]) -> list[bool]:
    """For each token: is it at file scope (outside every function body)?"""
    out, stack = [], []  # stack of bools: brace opens a namespace/extern/class (True) or body
    for i, t in enumerate(toks):
        out.append(all(stack))
        if t.text == "{":
            stack.append(_opens_no_body(toks, i))
        elif t.text == "}" and stack:
            stack.pop()
    return out


def _function_kinds(toks: list[Tok]) -> list[bool | None]:
    """For each token: None outside every function body, else whether the function whose body
    holds it is a kernel (``kernel`` or ``[[kernel]]`` in its declaration)."""
    out: list[bool | None] = []
    stack: list[bool | None] = []  # per open brace: its function's kind, None outside one
    for i, t in enumerate(toks):
        current = next((s for s in reversed(stack) if s is not None), None)
        out.append(current)
        if t.text == "{":
            if current is not None:
                stack.append(current)
            elif _opens_no_body(toks, i):
                stack.append(None)
            else:  # a function body: its declaration runs back to the previous ; { or }
                j = i - 1
                while j >= 0 and toks[j].text not in (";", "{", "}"):
                    j -= 1
                stack.append(any(x.text == "kernel" for x in toks[j + 1:i]))
        elif t.text == "}" and stack:
            stack.pop()
    return out


def group_storage_problems(src: str, *, body: bool) -> list[tuple[int, str]]:
    """(line, message) for each ``threadgroup`` variable MSL does not allow (MSL 3.2 §4.4),
    before rewrite_group_storage sees it: at program scope, in a function that is not a kernel,
    with an initializer, or an array without a size. ``body``: ``src`` is a kernel's body (an
    MLX ``source``), so its declarations are the kernel's."""
    toks = tokenize(src)
    kinds = [True] * len(toks) if body else _function_kinds(toks)
    out = []
    for i, t in enumerate(toks):
        span = _storage_statement(toks, i) if t.text == "threadgroup" else None
        if not span:
            continue
        stmt = [x.text for x in toks[span[0]:span[1] + 1]]
        if "extern" in stmt:
            continue  # the allow-list refuses `extern` itself
        if kinds[i] is None:
            out.append((t.line, "program scope variable must reside in constant address space "
                        "(a threadgroup variable belongs to a kernel: declare it in the kernel "
                        "and pass helpers a `threadgroup T*`)"))
        elif not kinds[i]:
            out.append((t.line, "non-kernel function variable cannot be declared in threadgroup "
                        "address space (declare it in the kernel and pass a `threadgroup T*`)"))
        elif "=" in stmt:
            out.append((t.line, "threadgroup variables cannot have an initializer (MSL 3.2 "
                        "§4.4): assign the first value in the kernel, then "
                        "threadgroup_barrier"))
        elif any(a == "[" and b == "]" for a, b in zip(stmt, stmt[1:], strict=False)):
            out.append((t.line, "definition of variable with array type needs an explicit size "
                        "or an initializer (a kernel body cannot declare runtime-sized "
                        "threadgroup memory: size the array with a template argument)"))
    return out


def rewrite_group_storage(src: str, word: str, space: str = "") -> str:
    """Rewrite ``threadgroup``/``__shared__`` storage declarations (see module docstring);
    ``space``: the address-space word their type keeps (metal_sim's check unit)."""
    toks = tokenize(src)
    file_scope = _scopes(toks)
    ed = _Editor(src)
    i = 0
    while i < len(toks):
        span = _storage_statement(toks, i) if toks[i].text == word else None
        if span:
            first, last = span
            stmt = toks[first:last + 1]
            ed.replace(stmt[0].start, stmt[-1].end,
                       _group_storage_decl(stmt, word, file_scope[i], space))
            i = last + 1
            continue
        i += 1
    return ed.result()


_CUDA_WIDE = {f"{t}{n}" for t in ("float", "int", "uint", "double", "long", "ulong", "longlong",
                                   "ulonglong", "short", "ushort") for n in (2, 4)} | {
    "__half2", "__nv_bfloat162", "half2", "char4", "uchar4"}


def rewrite_cuda_vector_casts(src: str) -> str:
    """``reinterpret_cast<float4*>(p)`` and ``(float4*)p`` -> an alignment-checked cast, so a
    misaligned vector load is reported as on a GPU (which faults) instead of silently working."""
    toks = tokenize(src)
    ed = _Editor(src)
    for i, t in enumerate(toks):
        if t.text == "reinterpret_cast" and i + 1 < len(toks) and toks[i + 1].text == "<":
            close = _template_id_end(toks, i + 1)
            inner = [x.text for x in toks[i + 2:close]]
            if close > 0 and inner and inner[-1] == "*" and any(x in _CUDA_WIDE for x in inner):
                ed.replace(t.start, t.end, "::__kp_cuda::aligned_ptr_cast")
        elif t.text == "(" and i + 2 < len(toks):
            j = i + 1
            while j < len(toks) and toks[j].text in ("const", "volatile"):
                j += 1
            if (j + 2 < len(toks) and toks[j].text in _CUDA_WIDE and toks[j + 1].text == "*"
                    and toks[j + 2].text == ")"):
                end = _operand_end(toks, j + 3)
                if end > j + 3:
                    target = ed.data[toks[i + 1].start:toks[j + 1].end].decode()
                    operand = ed.data[toks[j + 3].start:toks[end - 1].end].decode()
                    ed.replace(t.start, toks[end - 1].end,
                               f"::__kp_cuda::aligned_ptr_cast<{target}>({operand})")
    return ed.result()


def strip_address_spaces(src: str) -> str:
    """Remove Metal address-space words left in types (parameters, pointers, casts).

    ``constant`` becomes ``const`` (unless a ``const`` stands next to it), so a const table can
    still be passed where MSL declares a ``constant T*`` parameter."""
    ed = _Editor(src)
    toks = tokenize(src)
    for i, t in enumerate(toks):
        if t.kind == "preproc_arg":  # a macro's body: one token to tree-sitter
            for start, end, keep in _macro_body_spaces(t.text):
                ed.replace(t.start + start, t.start + end, keep.ljust(end - start))
            continue
        if t.text not in ADDRESS_SPACES or (i and toks[i - 1].text in ("[[", "[")):
            continue  # [[threadgroup(0)]] is an attribute, not an address space
        near = {toks[j].text for j in (i - 1, i + 1) if 0 <= j < len(toks)}
        keep = "const" if t.text == "constant" and "const" not in near else ""
        ed.replace(t.start, t.end, keep.ljust(len(t.text)))
    return ed.result()


_SPACE_WORD = re.compile(rb"(?<![\w.])(" + "|".join(sorted(ADDRESS_SPACES)).encode()
                         + rb")(?![\w(])")


def _macro_body_spaces(body: str) -> list[tuple[int, int, str]]:
    """(byte start, end, replacement) of the address-space words in a macro body:
    llama.cpp's `static const constant T name[n] = {` tables."""
    data = body.encode()
    out = []
    for m in _SPACE_WORD.finditer(data):
        before, after = data[:m.start()].rstrip(), data[m.end():].lstrip()
        if before.endswith(b"[") or before.count(b'"') % 2:
            continue  # an attribute, or inside a string
        near = re.findall(rb"\w+$", before) + re.findall(rb"^\w+", after)
        keep = "const" if m[1] == b"constant" and b"const" not in near else ""
        out.append((m.start(), m.end(), keep))
    return out


def mark_address_spaces(src: str) -> str:
    """For metal_sim's address-space check: keep the address-space words (the check unit
    defines them as clang address spaces), give ``constant`` its ``const`` and rename the
    ``[[threadgroup(n)]]`` attribute so the ``threadgroup`` macro leaves it alone."""
    ed = _Editor(src)
    toks = tokenize(src)
    for i, t in enumerate(toks):
        if t.text not in ADDRESS_SPACES:
            continue
        before = [x.text for x in toks[max(0, i - 2):i]]
        if before[-1:] in (["[["], ["["]):
            ed.replace(t.start, t.end, "__kp_threadgroup_attr")
        elif before[-1:] == [")"] or before[-2:] in ([")", "const"], [")", "volatile"]):
            # a member function's address space: plain C++ has none (metal_sim keeps no check)
            ed.replace(t.start, t.end, " " * len(t.text))
        elif t.text == "constant" and "const" not in {toks[j].text for j in (i - 1, i + 1)
                                                       if 0 <= j < len(toks)}:
            ed.replace(t.start, t.end, "constant const")
    return ed.result()


_CAST_WORDS = {"const", "volatile", "unsigned", "signed", "struct", "typename", "::", "<", ">",
               ","} | ADDRESS_SPACES


def check_pointer_casts(src: str) -> str:
    """``(T*)e`` -> ``__kp_ascast<T*>(e)`` (metal_sim's check unit): clang lets a C-style cast
    change a pointer's address space, MSL does not; ``__kp_ascast`` refuses that at this line.
    ``reinterpret_cast<T*>`` becomes it too, so both casts follow one rule (the compile itself
    still checks reinterpret_cast's other rules)."""
    toks = tokenize(src)
    ed = _Editor(src)
    for i, t in enumerate(toks):
        if t.text == "reinterpret_cast" and i + 1 < len(toks) and toks[i + 1].text == "<":
            close = _template_id_end(toks, i + 1)  # to a pointer: the same check as (T*)e
            if close > 0 and toks[close - 1].text == "*":
                ed.replace(t.start, t.end, "__kp_ascast")
            continue
        if t.text != "(" or (i and (toks[i - 1].kind in ("identifier", "type_identifier",
                                                          "primitive_type")
                                    or toks[i - 1].text in ("sizeof", "alignof", "decltype",
                                                            "operator", ")", "]"))):
            continue
        j = i + 1
        while j < len(toks) and (toks[j].kind in ("identifier", "type_identifier",
                                                   "primitive_type", "namespace_identifier",
                                                   "number_literal")
                                 or toks[j].text in _CAST_WORDS):
            j += 1
        stars = j
        while j < len(toks) and toks[j].text in {"*", "const", "volatile"} | ADDRESS_SPACES:
            j += 1
        if stars == i + 1 or j == stars or toks[stars].text != "*" or j >= len(toks) or \
                toks[j].text != ")" or toks[j - 1].text not in ("*", "const", "volatile"):
            continue
        end = _operand_end(toks, j + 1)
        if end <= j + 1:
            continue
        target = ed.data[toks[i + 1].start:toks[j - 1].end].decode()
        ed.replace(t.start, toks[j].end, f"__kp_ascast<{target}>(")
        ed.replace(toks[end - 1].end, toks[end - 1].end, ")")
    return ed.result()


def _operand_end(toks: list[Tok], i: int) -> int:
    """Index after the unary expression starting at toks[i] (the operand of a cast)."""
    while i < len(toks) and toks[i].text in ("-", "+", "!", "~", "*", "&", "++", "--"):
        i += 1
    if i >= len(toks):
        return i

    def skip_group(j: int) -> int:
        depth = 0
        for k in range(j, len(toks)):
            if toks[k].text in "([{":
                depth += 1
            elif toks[k].text in ")]}":
                depth -= 1
                if depth == 0:
                    return k + 1
        return len(toks)

    if toks[i].text == "(":
        i = skip_group(i)
        if i < len(toks) and toks[i - 1].text == ")" and toks[i].text not in (
                "[", ".", "->", "(", "++", "--"):
            return i
    else:
        i += 1
        while i + 1 < len(toks) and toks[i].text == "::":
            i += 2
    while i < len(toks):
        t = toks[i].text
        if t in ("[", "("):
            i = skip_group(i)
        elif t in (".", "->") and i + 1 < len(toks):
            i += 2
        elif t in ("++", "--"):
            i += 1
        else:
            break
    return i


_EXPR_AFTER = {"=", "(", ",", "return", "{", "[", "?", ":", "+", "-", "*", "/", "%", "<", ">",
               "<=", ">=", "==", "!=", "&&", "||", "!", "&", "|", "^", "+=", "-=", "*=", "/=",
               "<<", ">>", "~", ";", "}"}


def _declarator(toks: list[Tok], i: int, statement: bool) -> bool:
    """Whether the ``(`` at ``toks[i]`` opens a declarator, not a constructor's arguments:
    ``float4 (&)[1]`` (a reference to an array, as in ``reinterpret_cast<thread float4
    (&)[1]>(v)``), ``float4 (&r)[1]``, ``float4 (*)[2]``, and at a ``statement``'s start
    ``float4 (*q)[2] = p;``. No vector is made from an address, so ``(&`` names one always;
    ``(*p)`` elsewhere is an argument (``float4(*p)`` copies ``*p``)."""
    after = [t.text for t in toks[i + 1:i + 5]]
    named = len(after) > 2 and toks[i + 2].kind == "identifier" and after[2] == ")"
    if after[:1] in (["&"], ["&&"]):
        return after[1:2] == [")"] or named
    return after[:2] == ["*", ")"] or (statement and named and after[3:4] == ["["])


def _template_type_params(toks: list[Tok]) -> set[str]:
    """Names declared as ``typename X`` / ``class X`` in template parameter lists."""
    names = set()
    for i, t in enumerate(toks[:-1]):
        if t.text in ("typename", "class") and toks[i + 1].kind in ("identifier",
                                                                    "type_identifier"):
            if i and toks[i - 1].text in ("<", ","):
                names.add(toks[i + 1].text)
    return names


def _template_id_end(toks: list[Tok], i: int) -> int:
    """Index of the ``>`` closing the template argument list opened at toks[i] (``<``)."""
    depth = 0
    for j in range(i, len(toks)):
        depth += toks[j].text == "<"
        depth -= toks[j].text == ">"
        depth -= 2 * (toks[j].text == ">>")
        if depth <= 0:
            return j
    return -1


def rewrite_metal_constructors(src: str) -> str:
    """``float4(a, b)`` -> ``__kp::make<float4>(a, b)``; ``(half4)x`` and ``static_cast<half4>(x)``
    -> ``__kp::convert<half4>(...)``. Template type parameters get the same treatment, since they
    may stand for vectors; for scalars __kp::make/convert act as the plain cast."""
    toks = tokenize(src)
    # half and bfloat too: clang refuses functional casts between _Float16 and __bf16.
    types = CONSTRUCTIBLE | {"half", "bfloat"} | _template_type_params(toks)
    ed = _Editor(src)
    for i, t in enumerate(toks):
        name = t.text
        nxt = toks[i + 1].text if i + 1 < len(toks) else ""
        prev = toks[i - 1].text if i else ";"
        if name in types and nxt == "(" and prev in _EXPR_AFTER | {"::"} and \
                not _declarator(toks, i + 1, prev in (";", "{", "}") or i == 0):
            first = i - 2 if prev == "::" and i >= 2 and toks[i - 2].text == "metal" else i
            ed.replace(toks[first].start, t.end, f"__kp::make<{name}>")
        elif name == "vec" and nxt == "<" and prev in _EXPR_AFTER | {"::"}:
            close = _template_id_end(toks, i + 1)
            if close > 0 and close + 1 < len(toks) and toks[close + 1].text == "(":
                first = i - 2 if prev == "::" and i >= 2 and toks[i - 2].text == "metal" else i
                ed.replace(toks[first].start, toks[close].end,
                           f"__kp::make<{ed.data[t.start:toks[close].end].decode()}>")
        elif (name in types and prev == "(" and nxt == ")" and i >= 2
              and toks[i - 2].text not in ("sizeof", "alignof", "decltype") and
              toks[i - 2].kind != "identifier" and i + 2 < len(toks)):
            end = _operand_end(toks, i + 2)
            if end == i + 2:
                continue
            # two edits around the operand, so rewrites inside it (`float4(x)`) still apply
            ed.replace(toks[i - 1].start, toks[i + 1].end, f"__kp::convert<{name}>(")
            ed.replace(toks[end - 1].end, toks[end - 1].end, ")")
        elif name == "static_cast" and nxt == "<" and i + 3 < len(toks) and toks[
                i + 2].text in types and toks[i + 3].text == ">":
            ed.replace(t.start, t.end, "__kp::convert")
        elif t.kind == "number_literal" and name[-1:] == "H" and not name.startswith("0x"):
            ed.replace(t.start, t.end, name[:-1] + "h")
        elif t.kind == "number_literal" and name.endswith("bf"):
            ed.replace(t.start, t.end, f"bfloat({name[:-2]}f)")
    return ed.result()
