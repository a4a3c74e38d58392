"""Conditions known when the kernel is ported: integer and bool expressions over literals, the
kernel's template parameters bound for this instantiation and ``constexpr`` values, evaluated
as C++ evaluates them (``/`` truncates, ``&&`` and ``||`` stop early). Unsigned literals are
not folded (``0u - 1`` wraps in C++): such a condition stays as written.

A ternary whose branches point into different memories (``use_shared ? buf : dst`` with a
threadgroup ``buf`` and a device ``dst``) has no type in MSL; when its condition folds, the
emitter keeps the branch this instantiation takes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

Value = int | bool
# what a caller knows beyond literals and ``constants``: the value of a node fold cannot read
# itself (a traits class's member `Ktraits::kIsEvenLen`, `std::is_same_v<T, float>`: traits.py)
Lookup = Callable[[Node], "Value | None"]

# a signed integer literal (`-2` is one literal to tree-sitter); an unsigned one is not folded
_INT = re.compile(r"(-?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)[lL]*")
_BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "<<": lambda a, b: a << b if 0 <= b < 64 else None,
    ">>": lambda a, b: a >> b if 0 <= b < 64 else None,
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    # C++ truncates toward zero; the remainder takes the dividend's sign
    "/": lambda a, b: None if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    "%": lambda a, b: None if b == 0 else abs(a) % abs(b) * (1 if a >= 0 else -1),
}


def fold(node: Node | None, data: bytes, constants: dict[str, Value],
         lookup: Lookup | None = None) -> Value | None:
    """The value of the C++ expression ``node`` when it is known at port time (literals, the
    names of ``constants``, and what ``lookup`` knows); None otherwise (a runtime value, a
    float, a call)."""
    if node is None:
        return None
    value = _fold(node, data, constants, lookup)
    if value is None and lookup is not None:
        value = lookup(node)
    return value


def _fold(node: Node, data: bytes, constants: dict[str, Value],
          lookup: Lookup | None) -> Value | None:
    t = node.type
    text = data[node.start_byte:node.end_byte].decode(errors="replace")
    if t in ("true", "false"):
        return t == "true"
    if t == "number_literal":
        m = _INT.fullmatch(text.replace("'", ""))
        if m is None:
            return None
        value = int(m[2], 8 if re.fullmatch(r"0[0-7]+", m[2]) else 0)
        return -value if m[1] else value
    if t == "identifier":
        return constants.get(text)
    if t == "parenthesized_expression" and len(node.named_children) == 1:
        return fold(node.named_children[0], data, constants, lookup)
    if t == "unary_expression":
        value = fold(node.child_by_field_name("argument"), data, constants, lookup)
        op = node.child_by_field_name("operator")
        op = data[op.start_byte:op.end_byte].decode() if op is not None else ""
        if value is None:
            return None
        return {"!": lambda v: not v, "-": lambda v: -v, "+": lambda v: +v,
                "~": lambda v: ~v}.get(op, lambda v: None)(value)
    if t == "binary_expression":
        op_node = node.child_by_field_name("operator")
        op = data[op_node.start_byte:op_node.end_byte].decode() if op_node is not None else ""
        left = fold(node.child_by_field_name("left"), data, constants, lookup)
        if op in ("&&", "||"):
            if left is not None and bool(left) == (op == "||"):
                return op == "||"  # decided by the left side, as C++ stops there
            right = fold(node.child_by_field_name("right"), data, constants, lookup)
            return None if left is None or right is None else bool(right)
        right = fold(node.child_by_field_name("right"), data, constants, lookup)
        if left is None or right is None or op not in _BINARY:
            return None
        return _BINARY[op](int(left), int(right))
    if t == "conditional_expression":
        cond = fold(node.child_by_field_name("condition"), data, constants, lookup)
        if cond is None:
            return None
        return fold(node.child_by_field_name("consequence" if cond else "alternative"), data,
                    constants, lookup)
    return None


def constexpr_values(scope: Node, data: bytes, constants: dict[str, Value],
                     lookup: Lookup | None = None) -> dict[str, Value]:
    """``constants`` plus every ``constexpr`` integer or bool that ``scope`` declares with a
    value that folds (``constexpr bool use_shared = NCOLS > 0;``), in order. A name declared
    again (twice with different values, or once more as a variable or parameter) is left out:
    which one a use sees depends on its scope. Nested functions and types are not read."""
    out = dict(constants)
    shadowed: set[str] = set()
    stack = [scope]
    while stack:
        n = stack.pop()
        if n is not scope and n.type in _OTHER_SCOPES:
            continue
        if n.type in ("declaration", "parameter_declaration", "optional_parameter_declaration"):
            constexpr = any(c.type == "type_qualifier" and _text(c, data) == "constexpr"
                            for c in n.children)
            for d in n.children_by_field_name("declarator"):
                name = d.child_by_field_name("declarator") if d.type == "init_declarator" \
                    else d
                while name is not None and name.type != "identifier":
                    name = name.child_by_field_name("declarator")
                if name is None:
                    continue
                key = _text(name, data)
                got = fold(d.child_by_field_name("value"), data, out, lookup) if constexpr \
                    else None
                if got is None or key in shadowed or (key in out and out[key] != got):
                    shadowed.add(key)
                    out.pop(key, None)
                else:
                    out[key] = got
        stack.extend(reversed(n.children))
    return out


_OTHER_SCOPES = ("function_definition", "lambda_expression", "struct_specifier",
                 "class_specifier", "template_declaration")


def _text(n: Node, data: bytes) -> str:
    return data[n.start_byte:n.end_byte].decode(errors="replace")
