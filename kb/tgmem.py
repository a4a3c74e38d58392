"""Static threadgroup memory of a Metal kernel body: its ``threadgroup T name[..]..;``
declarations and their sizes in bytes, with template values and the source's own integer
constants (``constexpr``/``const``/``constant`` declarations, ``#define``) substituted.

Read from tree-sitter tokens (runners.srcrewrite.tokenize), never by regex. A size that needs
something unknown (a runtime value, a struct type) comes back as ``nbytes=None`` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runners.dtypes import DTYPES
from runners.srcrewrite import Tok, tokenize

# Scalar sizes in bytes (MSL; mirrored and static_asserted in the simulator's kport/metal/types.h).
SCALAR_BYTES = {
    "bool": 1, "char": 1, "uchar": 1, "short": 2, "ushort": 2, "half": 2, "bfloat": 2,
    "int": 4, "uint": 4, "float": 4, "long": 8, "ulong": 8, "size_t": 8, "ptrdiff_t": 8,
    "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
    "int64_t": 8, "uint64_t": 8, "float16_t": 2, "bfloat16_t": 2, "complex64_t": 8,
    "double": 8, "unsigned": 4, "signed": 4,
}
ATOMIC_ALIASES = {"atomic_int": "int", "atomic_uint": "uint", "atomic_float": "float",
                  "atomic_bool": "bool", "atomic_ulong": "ulong", "atomic_long": "long"}
QUALIFIERS = {"const", "volatile", "static", "metal", "::", "constexpr"}
_STATEMENT_START = {";", "{", "}"}
_BINARY = [("|",), ("^",), ("&",), ("<<", ">>"), ("+", "-"), ("*", "/", "%")]


class SizeUnknown(Exception):
    """A size expression needs something this module cannot know; the message says what."""


@dataclass(frozen=True)
class TgDecl:
    """One threadgroup array or variable: element type, dimension texts, line and bytes."""

    name: str
    type: str
    dims: tuple[str, ...]
    line: int
    nbytes: int | None
    why: str = ""  # why nbytes is None


def template_types(template: Mapping[str, object]) -> dict[str, str]:
    """Template typename arguments as Metal spellings (``"float16"`` -> ``float16_t``)."""
    out = {}
    for name, value in template.items():
        if isinstance(value, str):
            out[name] = DTYPES[value][1] if value in DTYPES else value
    return out


def template_ints(template: Mapping[str, object]) -> dict[str, int]:
    """Template int/bool arguments as ints (a bool prints as 1/0, as MLX writes it)."""
    return {k: int(v) for k, v in template.items() if isinstance(v, (bool, int))}


def type_bytes(words: list[str], types: Mapping[str, str]) -> int:
    """Size of a Metal type given as its tokens (``["atomic", "<", "float", ">"]``,
    ``["float4"]``, ``["T"]`` with ``types={"T": "half"}``); SizeUnknown otherwise."""
    words = [w for w in words if w not in QUALIFIERS]
    if len(words) >= 4 and words[0] in ("atomic", "vec") and words[1] == "<":
        inner = words[2:words.index(">")] if ">" in words else words[2:]
        if words[0] == "atomic":
            return type_bytes(inner, types)
        comma = inner.index(",") if "," in inner else len(inner)
        lanes = evaluate(inner[comma + 1:], {}) if comma < len(inner) else 1
        return _vector(type_bytes(inner[:comma], types), lanes, packed=False)
    if len(words) != 1:
        raise SizeUnknown(f"type `{' '.join(words)}`")
    word = types.get(words[0], words[0])
    word = ATOMIC_ALIASES.get(word, word)
    if word in SCALAR_BYTES:
        return SCALAR_BYTES[word]
    packed = word.startswith("packed_")
    base = word.removeprefix("packed_")
    stem = base.rstrip("0123456789x")
    shape = base[len(stem):]
    if stem in SCALAR_BYTES and shape:
        if "x" in shape:  # matrix: columns of `rows`-vectors
            cols, _, rows = shape.partition("x")
            if cols.isdigit() and rows.isdigit():
                return int(cols) * _vector(SCALAR_BYTES[stem], int(rows), packed=False)
        elif shape.isdigit():
            return _vector(SCALAR_BYTES[stem], int(shape), packed)
    raise SizeUnknown(f"type `{word}`")


def _vector(scalar: int, lanes: int, packed: bool) -> int:
    # Three-lane vectors are stored as four unless packed (MSL: float3 is 16 bytes).
    return scalar * (lanes if packed or lanes != 3 else 4)


def _int_literal(text: str) -> int:
    body = text.replace("'", "").rstrip("uUlL")
    try:
        return int(body, 0) if not (body.startswith("0") and body.isdigit()) else int(body, 8)
    except ValueError:
        raise SizeUnknown(f"`{text}` is not an integer") from None


def evaluate(words: list[str], values: Mapping[str, int],
             types: Mapping[str, str] | None = None) -> int:
    """Value of an integer constant expression (C operators and ``sizeof(type)``) over
    ``values`` (and template ``types`` for sizeof); SizeUnknown naming the first unknown name or
    construct."""
    words = _split_signs(words)
    pos, result = _Expr(words, values, types or {}).parse(0, 0)
    if pos != len(words):
        raise SizeUnknown(f"`{' '.join(words)}`")
    return result


def _split_signs(words: list[str]) -> list[str]:
    # tree-sitter reads `-7` as one literal; split off the sign (unary or binary, both parse).
    out: list[str] = []
    for w in words:
        out += [w[0], w[1:]] if len(w) > 1 and w[0] in "+-" and w[1].isdigit() else [w]
    return out


@dataclass(frozen=True)
class _Expr:
    w: list[str]
    values: Mapping[str, int]
    types: Mapping[str, str]

    def parse(self, i: int, level: int) -> tuple[int, int]:
        if level == len(_BINARY):
            return self.unary(i)
        i, left = self.parse(i, level + 1)
        while i < len(self.w) and self.w[i] in _BINARY[level]:
            op = self.w[i]
            i, right = self.parse(i + 1, level + 1)
            left = _apply(op, left, right)
        return i, left

    def unary(self, i: int) -> tuple[int, int]:
        w = self.w
        if i >= len(w):
            raise SizeUnknown("an incomplete expression")
        t = w[i]
        if t in ("-", "+", "~", "!"):
            i, v = self.unary(i + 1)
            return i, {"-": -v, "+": v, "~": ~v, "!": int(not v)}[t]
        if t == "sizeof" and i + 1 < len(w) and w[i + 1] == "(":
            close = _close(w, i + 1)
            return close + 1, type_bytes(w[i + 2:close], self.types)
        if t == "(":
            i, v = self.parse(i + 1, 0)
            if i >= len(w) or w[i] != ")":
                raise SizeUnknown("an unbalanced '('")
            return i + 1, v
        if t[0].isdigit():
            return i + 1, _int_literal(t)
        if t in self.values:
            return i + 1, self.values[t]
        if t in ("true", "false"):
            return i + 1, int(t == "true")
        raise SizeUnknown(f"`{t}`" if t.isidentifier() else f"`{t}` in a size")


def _close(words: list[str], i: int) -> int:
    depth = 0
    for j in range(i, len(words)):
        depth += {"(": 1, ")": -1}.get(words[j], 0)
        if depth == 0:
            return j
    raise SizeUnknown("an unbalanced '('")


def _apply(op: str, a: int, b: int) -> int:
    if op in ("/", "%") and b == 0:
        raise SizeUnknown("a division by zero")
    if op == "/":
        return abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncates
    if op == "%":
        return a - _apply("/", a, b) * b
    return {"|": a | b, "^": a ^ b, "&": a & b, "<<": a << b, ">>": a >> b, "+": a + b,
            "-": a - b, "*": a * b}[op]


def constants(toks: list[Tok], values: Mapping[str, int],
              types: Mapping[str, str] | None = None) -> dict[str, int]:
    """``values`` plus the integer constants the source declares (``#define N 32``,
    ``constexpr int K = N * 2;``, ``const``/``constant`` likewise) that evaluate."""
    out = dict(values)
    for i, t in enumerate(toks):
        if t.text == "#define" and i + 2 < len(toks) and toks[i + 2].kind == "preproc_arg":
            try:
                words = [x.text for x in tokenize(toks[i + 2].text)]
                out[toks[i + 1].text] = evaluate(words, out, types)
            except SizeUnknown:
                pass
        elif t.text == "=" and i >= 2 and toks[i - 1].kind == "identifier":
            start = i - 1
            while start > 0 and toks[start - 1].text not in _STATEMENT_START:
                start -= 1
            head = {x.text for x in toks[start:i - 1]}
            if not head & {"constexpr", "const", "constant"} or "*" in head or "&" in head:
                continue
            end = i + 1
            while end < len(toks) and toks[end].text not in (";", ","):
                end += 1
            try:
                out[toks[i - 1].text] = evaluate([x.text for x in toks[i + 1:end]], out, types)
            except SizeUnknown:
                pass
    return out


def threadgroup_decls(src: str, template: Mapping[str, object] | None = None) -> list[TgDecl]:
    """Every ``threadgroup`` storage declaration of ``src`` (pointers and parameters are not
    storage), sized with ``template`` values and the source's constants."""
    template = template or {}
    toks = tokenize(src)
    types = template_types(template)
    values = constants(toks, template_ints(template), types)
    out: list[TgDecl] = []
    for i, t in enumerate(toks):
        if t.text != "threadgroup" or (i and toks[i - 1].text not in _STATEMENT_START):
            continue
        end = i + 1
        while end < len(toks) and toks[end].text != ";":
            end += 1
        out += _declarators(toks[i + 1:end], values, types)
    return out


def _declarators(toks: list[Tok], values, types) -> list[TgDecl]:
    angle, k = 0, 0
    while k < len(toks):  # the type ends before the first name followed by [ ; , =
        text = toks[k].text
        angle += {"<": 1, ">": -1, ">>": -2}.get(text, 0)
        after = toks[k + 1].text if k + 1 < len(toks) else ";"
        if angle <= 0 and toks[k].kind.endswith("identifier") and after in ("[", ",", "=", ";") \
                and k > 0:
            break
        k += 1
    type_words = _drop_attributes([x.text for x in toks[:k]])
    if any(w in ("*", "&") for w in type_words) or k >= len(toks):
        return []
    out = []
    for part in _split_commas(toks[k:]):
        name, dims, line = part[0].text, [], part[0].line
        j = 1
        while j < len(part) and part[j].text == "[":
            close = _matching(part, j)
            dims.append([x.text for x in part[j + 1:close]])
            j = close + 1
        out.append(_sized(name, type_words, dims, line, values, types))
    return out


def _sized(name, type_words, dims, line, values, types) -> TgDecl:
    texts = tuple(" ".join(d) for d in dims)
    try:
        size = type_bytes(type_words, types)
        for d in dims:
            if not d:
                raise SizeUnknown("an unsized array (metal_kernel has no dynamic threadgroup "
                                  "memory)")
            size *= evaluate(d, values, types)
    except SizeUnknown as err:
        return TgDecl(name, type_text(type_words), texts, line, None, str(err))
    return TgDecl(name, type_text(type_words), texts, line, size)


def type_text(words: list[str]) -> str:
    """Type tokens joined as written: ``atomic<float>``, ``const float``."""
    out = ""
    for w in words:
        if out and (out[-1].isalnum() or out[-1] == "_") and (w[0].isalnum() or w[0] == "_"):
            out += " "
        out += w + (" " if w == "," else "")
    return out


def _drop_attributes(words: list[str]) -> list[str]:
    """Type words without ``__attribute__((...))`` / ``alignas(...)`` (they do not change the
    size of an array of the type)."""
    out, i = [], 0
    while i < len(words):
        if words[i] in ("__attribute__", "alignas") and i + 1 < len(words) and words[i + 1] == "(":
            depth = 0
            for j in range(i + 1, len(words)):
                depth += {"(": 1, ")": -1}.get(words[j], 0)
                if depth == 0:
                    break
            i = j + 1
            continue
        out.append(words[i])
        i += 1
    return out


def _split_commas(toks: list[Tok]) -> list[list[Tok]]:
    parts, depth, cur = [], 0, []
    for t in toks:
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(t.text, 0)
        if t.text == "," and depth == 0:
            parts.append(cur)
            cur = []
            continue
        cur.append(t)
    parts.append(cur)
    return [p for p in parts if p and p[0].kind.endswith("identifier")]


def _matching(toks: list[Tok], i: int) -> int:
    depth = 0
    for j in range(i, len(toks)):
        depth += {"[": 1, "]": -1}.get(toks[j].text, 0)
        if depth == 0:
            return j
    return len(toks)
