"""The types of simple expressions in device code, as far as kport can be sure of them: what a
call passes to a template (`conversion::to<float>(buf[j])`, `buf` a local `T buf[4]` in a
kernel instantiated with T = float) decides which specialisation it uses (specialisations.py).
A type is a canonical spelling (`float`, `__half*`; stdint and `half`-style aliases merged into
one name each, so that a comparison never tells apart what may be one type); None where kport
cannot tell, and callers then keep everything."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from tree_sitter import Node

from agent.translate.tree import _text, _walk
from runners.simbuild import INCLUDE

# spellings of one builtin type -> one name; `long`, `long long` and int64_t are merged (int64_t
# is `long` on Linux and `long long` on macOS), `char` and `signed char` too: merging keeps more
_BUILTIN = {
    "bool": "bool", "char": "schar", "signed char": "schar", "int8_t": "schar",
    "unsigned char": "uchar", "uint8_t": "uchar", "short": "short", "short int": "short",
    "signed short": "short", "int16_t": "short", "unsigned short": "ushort",
    "unsigned short int": "ushort", "uint16_t": "ushort", "int": "int", "signed": "int",
    "signed int": "int", "int32_t": "int", "unsigned": "uint", "unsigned int": "uint",
    "uint32_t": "uint", "long": "i64", "long int": "i64", "long long": "i64",
    "long long int": "i64", "int64_t": "i64", "ptrdiff_t": "i64", "unsigned long": "u64",
    "unsigned long int": "u64", "unsigned long long": "u64", "unsigned long long int": "u64",
    "uint64_t": "u64", "size_t": "u64", "float": "float", "double": "double", "void": "void",
}
_SMALL = {"bool", "schar", "uchar", "short", "ushort"}  # promoted to int in arithmetic
# the toolchain's types (CUDA's spellings of one type merged)
_TOOLCHAIN = {"half": "__half", "__half": "__half", "half2": "__half2", "__half2": "__half2",
              "nv_bfloat16": "__nv_bfloat16", "__nv_bfloat16": "__nv_bfloat16",
              "nv_bfloat162": "__nv_bfloat162", "__nv_bfloat162": "__nv_bfloat162"}
_VECTOR = re.compile(r"(u?char|u?short|u?int|u?long|u?longlong|float|double)[1-4]")
_DROPPED = {"const", "volatile", "struct", "class", "enum", "union", "__restrict__",
            "__restrict", "restrict"}
_NOT_TYPES = {"return", "else", "case", "sizeof", "new", "delete", "if", "while", "for",
              "switch", "do", "throw", "alignof", "decltype"}
_ARITHMETIC = {"+", "-", "*", "/", "%", "&", "|", "^"}


@dataclass
class Scope:
    """What the types of a function's expressions depend on: its template parameters' values
    (``bindings``, canonical) and which are unknown (``dependent``), the source's aliases
    (name -> every spelling it is given) and class names, and ``call_type``: the canonical type
    a call returns, or None."""
    data: bytes
    bindings: dict[str, str | None] = field(default_factory=dict)
    dependent: set[str] = field(default_factory=set)
    aliases: dict[str, set[str]] = field(default_factory=dict)
    classes: set[str] = field(default_factory=set)
    locals: dict[str, set[str]] = field(default_factory=dict)
    call_type: object = None


def canonical(spelled: str, scope: Scope, depth: int = 0) -> str | None:
    """The canonical spelling of type ``spelled`` in ``scope``; None when it is not one kport
    knows for sure (a template, a dependent name, an alias with several meanings)."""
    stars = spelled.count("*")
    words = [w for w in re.sub(r"[*&]", " ", spelled).split() if w not in _DROPPED]
    text = " ".join(words)
    if not words or depth > 8 or re.search(r"[<>()\[\]]|\btypename\b", text):
        return None
    if text in _BUILTIN:
        return _BUILTIN[text] + "*" * stars
    if len(words) > 1:
        return None
    name = text.rpartition("::")[2]
    if name in scope.bindings or name in scope.dependent:
        bound = scope.bindings.get(name)
        return bound + "*" * stars if bound is not None else None
    if name in scope.aliases:
        meanings = scope.aliases[name]
        inner = canonical(next(iter(meanings)), scope, depth + 1) if len(meanings) == 1 else None
        return inner + "*" * stars if inner is not None else None
    if name in _TOOLCHAIN:
        return _TOOLCHAIN[name] + "*" * stars
    if _VECTOR.fullmatch(name) or name in scope.classes:
        return name + "*" * stars
    return None


def declared_types(fn: Node, data: bytes) -> dict[str, set[str]]:
    """name -> the types (as spelled, a `*` per pointer or array level) of every parameter and
    local of that name in ``fn``."""
    out: dict[str, set[str]] = {}
    for n in _walk(fn):
        if n.type not in ("declaration", "parameter_declaration",
                          "optional_parameter_declaration", "field_declaration"):
            continue
        ty = n.child_by_field_name("type")
        if ty is None:
            continue
        for d in n.children_by_field_name("declarator"):
            levels = 0
            while d is not None and d.type not in ("identifier", "field_identifier"):
                levels += d.type in ("pointer_declarator", "array_declarator")
                d = d.child_by_field_name("declarator")
            if d is not None:
                spelled = _text(ty, data) + "*" * levels
                out.setdefault(_text(d, data), set()).add(spelled)
    return out


def expr_type(e: Node, scope: Scope) -> str | None:
    """The canonical type of expression ``e``; None when kport cannot be sure of it."""
    data, kind = scope.data, e.type
    if kind == "parenthesized_expression" and e.named_children:
        return expr_type(e.named_children[-1], scope)
    if kind == "identifier":
        spellings = scope.locals.get(_text(e, data), set())
        types = {canonical(s, scope) for s in spellings}
        return types.pop() if len(types) == 1 else None
    if kind == "number_literal":
        return _literal(_text(e, data).lower())
    if kind in ("true", "false"):
        return "bool"
    if kind == "char_literal":
        return "schar"
    if kind == "cast_expression":
        return canonical(_text(e.child_by_field_name("type"), data), scope)
    if kind == "pointer_expression":
        inner = expr_type(e.child_by_field_name("argument"), scope)
        op = e.children[0].type
        if inner is None:
            return None
        return inner + "*" if op == "&" else (inner[:-1] if inner.endswith("*") else None)
    if kind == "subscript_expression":
        inner = expr_type(e.child_by_field_name("argument"), scope)
        return inner[:-1] if inner is not None and inner.endswith("*") else None
    if kind == "unary_expression":
        op, inner = e.children[0].type, expr_type(e.child_by_field_name("argument"), scope)
        if op == "!":
            return "bool"
        return _promoted(inner) if inner is not None and "*" not in inner else None
    if kind == "binary_expression":
        return _binary(e, scope)
    if kind == "conditional_expression":
        a = expr_type(e.child_by_field_name("consequence"), scope)
        return a if a == expr_type(e.child_by_field_name("alternative"), scope) else None
    if kind == "call_expression":
        f = e.child_by_field_name("function")
        if f is not None and f.type == "primitive_type":  # `float(x)`
            return canonical(_text(f, data), scope)
        if f is not None and f.type == "template_function" and _text(
                f.child_by_field_name("name"), data) in ("static_cast", "reinterpret_cast",
                                                         "const_cast"):
            args = f.child_by_field_name("arguments")
            return canonical(_text(args.named_children[0], data), scope) \
                if args is not None and args.named_children else None
        return scope.call_type(e) if scope.call_type is not None else None
    return None


def _literal(text: str) -> str | None:
    if not text.startswith("0x") and re.fullmatch(r"[\d.]+(e[+-]?\d+)?[fl]?", text) and \
            ("." in text or "e" in text):
        return {"f": "float", "l": None}.get(text[-1], "double")
    m = re.fullmatch(r"(0x[\da-f]+|\d+)(u?)(l{0,2})(u?)", text)
    if m is None or int(m.group(1), 0) > 2**31 - 1:
        return None
    unsigned, wide = bool(m.group(2) or m.group(4)), bool(m.group(3))
    return {(False, False): "int", (True, False): "uint", (False, True): "i64",
            (True, True): "u64"}[unsigned, wide]


def _promoted(t: str) -> str:
    return "int" if t in _SMALL else t


def _binary(e: Node, scope: Scope) -> str | None:
    op = e.child_by_field_name("operator").type
    if op in ("==", "!=", "<", ">", "<=", ">=", "&&", "||"):
        return "bool"
    a = expr_type(e.child_by_field_name("left"), scope)
    b = expr_type(e.child_by_field_name("right"), scope)
    if a is None or b is None:
        return None
    numeric = set(_BUILTIN.values()) - {"void"}
    if op in ("<<", ">>"):
        return _promoted(a) if a in numeric and b in numeric else None
    if op in ("+", "-") and a.endswith("*") and b in numeric - {"float", "double"}:
        return a  # pointer arithmetic
    if op not in _ARITHMETIC or a not in numeric or b not in numeric:
        return None  # an operator of a class (`__half * __half`) or pointers
    for wide in ("double", "float"):
        if wide in (a, b):
            return wide
    a, b = _promoted(a), _promoted(b)
    return a if a == b else None


@cache
def toolchain_returns() -> dict[str, str]:
    """name -> the canonical return type of a function kport's CUDA headers declare, for the
    names all of whose declarations return one type (`__frsqrt_rn` -> float)."""
    found: dict[str, set[str | None]] = {}
    empty = Scope(b"")
    for header in sorted((INCLUDE / "kport" / "cuda").rglob("*.h")):
        code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", header.read_text(errors="replace"), flags=re.S)
        for m in re.finditer(r"((?:(?:unsigned|signed|long|short)\s+)*[A-Za-z_]\w*)\s*(\**)\s*"
                             r"\b([A-Za-z_]\w*)\s*\(", code):
            if m.group(1) not in _NOT_TYPES:  # a template's `T f(` or a macro: None, unknown
                found.setdefault(m.group(3), set()).add(canonical(m.group(1) + m.group(2), empty))
    return {name: next(iter(types)) for name, types in found.items()
            if len(types) == 1 and None not in types}
