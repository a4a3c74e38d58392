"""Braced lists handed to max and min (issue 16). MSL has no ``std::initializer_list``, yet
kernels size their shared memory with ``std::max({a, b, c})`` or a wrapper of it:
causal-conv1d's ``custom_max({sizeof(A::TempStorage), sizeof(B::TempStorage)})`` in a
``static constexpr`` member, whose definition ``constexpr size_t custom_max(
std::initializer_list<size_t> ilist) { return std::max(ilist); }`` takes the list.

Such a call is folded before translation into conditionals over the list's items, which are
constant expressions wherever the items are: ``max({a, b})`` becomes ``((a) < (b) ? (b) :
(a))``, as std::max chooses (the first of equal largest; std::min the first of equal
smallest). A wrapper is folded when its body is only ``return`` of std::max or std::min of
its list (or ``*std::max_element(l.begin(), l.end())``), into a cast to its return type; it
then has no caller left and the port's header leaves it out. Lines are kept, so every line
still names the one it came from. The oracle runs the original source."""

from __future__ import annotations

import re

from tree_sitter import Node

from agent.translate.tree import _text, _walk
from kb.parse import parse

MAX_ITEMS = 6  # each item folded doubles the text: longer lists stay (a counted TODO)
_DIRECT = {"std::max": "max", "std::min": "min", "max": "max", "min": "min"}


def fold(src: str) -> str:
    """``src`` with each max/min of a braced list folded (the module docstring says how)."""
    if "{" not in src or not re.search(r"\b(?:max|min|initializer_list)\b", src):
        return src
    data = src.encode()
    root = parse(data, "cuda")
    wrappers = _wrappers(root, data)
    edits = []
    for call in (n for n in _walk(root) if n.type == "call_expression"):
        fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
        if fn is None or args is None or len(args.named_children) != 1 or \
                args.named_children[0].type != "initializer_list":
            continue
        name = " ".join(_text(fn, data).split())
        op, cast = (_DIRECT[name], None) if name in _DIRECT else wrappers.get(name, (None, None))
        items = [_text(i, data) for i in args.named_children[0].named_children]
        if op is None or not items or len(items) > MAX_ITEMS:
            continue
        folded = _folded(op, items)
        text = f"(({cast})({folded}))" if cast else folded
        edits.append((call.start_byte, call.end_byte, " ".join(text.split()) +
                      "\n" * _text(call, data).count("\n")))
    for start, end, new in sorted(edits, reverse=True):
        if not any(s < start and end <= e for s, e, _ in edits):  # outermost calls only
            data = data[:start] + new.encode() + data[end:]
    return data.decode()


def _folded(op: str, items: list[str]) -> str:
    """max/min of ``items`` as nested conditionals, left to right."""
    best = f"({items[0]})"
    for item in items[1:]:
        x = f"({item})"
        best = f"({best} < {x} ? {x} : {best})" if op == "max" else \
            f"({x} < {best} ? {x} : {best})"
    return best


def _wrappers(root: Node, data: bytes) -> dict[str, tuple[str, str]]:
    """Functions of one ``std::initializer_list`` parameter that return its max or min:
    name -> (max or min, the return type). A name defined twice another way is left out."""
    found: dict[str, tuple[str, str] | None] = {}
    for fn in (n for n in _walk(root) if n.type == "function_definition"):
        decl = fn.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        if decl is None or decl.child_by_field_name("declarator") is None:
            continue
        name = _text(decl.child_by_field_name("declarator"), data)
        params = decl.child_by_field_name("parameters").named_children
        m = re.fullmatch(r"(?:const\s+)?std\s*::\s*initializer_list\s*<[^<>]+>\s*&?\s*(\w+)",
                         " ".join(_text(params[0], data).split())) if len(params) == 1 else None
        op = _returned(fn.child_by_field_name("body"), data, m[1]) if m else None
        kind = fn.child_by_field_name("type")
        got = (op, _text(kind, data)) if op and kind is not None else None
        found[name] = got if found.get(name, got) == got else None
    return {n: v for n, v in found.items() if v is not None}


def _returned(body: Node | None, data: bytes, param: str) -> str | None:
    """max or min when ``body`` is only ``return`` of that over ``param``."""
    statements = [c for c in body.named_children if c.type != "comment"] if body else []
    if len(statements) != 1 or statements[0].type != "return_statement":
        return None
    text = "".join(_text(statements[0], data).split())
    m = re.fullmatch(rf"return(?:std::)?(max|min)\({param}\);", text) or re.fullmatch(
        rf"return\*std::(max|min)_element\({param}\.begin\(\),{param}\.end\(\)\);", text)
    return m[1] if m else None
