"""The one evaluator of size expressions: the shapes, grids, values and template ints of a
case.toml ("rows*256", "ceil_div(n, 256)", "n % 4 == 0"), and the same in a generated package's
kernel.py, which carries this file's text (agent/package.py inlines it: a package needs only
numpy and MLX on a Mac). A small whitelist over Python's ``ast``, never eval(); only the
standard library, so the copy runs anywhere.
"""

from __future__ import annotations

import ast
import math
import operator


class SizeExprError(ValueError):
    """An expression that is not a cheap, finite number over the size names; the message
    starts with the ``where`` it was given (a case.toml key)."""


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
        ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
def _ceil_log2(d: int) -> int:
    """The smallest L (at most 32) with 2**L >= d."""
    return next((n for n in range(33) if (1 << n) >= d), 32)


def _fastdiv_mult(d: int) -> int:
    """The 32-bit multiplier of division by the invariant integer d (Granlund and Montgomery,
    as llama.cpp's init_fastdiv_values computes it): n / d == (umulhi(n, m) + n) >> L with
    L = ceil_log2(d) for every 32-bit n."""
    if d < 1:
        raise ValueError("fastdiv_mult needs a divisor of at least 1")
    return ((1 << 32) * ((1 << _ceil_log2(d)) - d) // d + 1) & 0xFFFFFFFF


def _next_pow2(n: int) -> int:
    """The smallest power of two >= n (a padded width: llama.cpp's next_power_of_2)."""
    return 1 << (n - 1).bit_length()


_FUNCS = {"min": min, "max": max, "ceil_div": lambda a, b: -(-a // b),
          "ceil_log2": _ceil_log2, "fastdiv_mult": _fastdiv_mult, "next_pow2": _next_pow2}
_ONE_ARG = {"ceil_log2", "fastdiv_mult", "next_pow2"}
FUNCTIONS = frozenset(_FUNCS)  # the function names an expression may call
ONE_ARG_FUNCTIONS = frozenset(_ONE_ARG)  # those of one integer of at least 1


# Bounds that keep an expression cheap: "n ** 9 ** 9" must fail at once, not hang.
MAX_EXPR_CHARS = 400
MAX_MAGNITUDE = 2**64


def _checked(value, expr, where):
    if isinstance(value, float) and not math.isfinite(value):
        raise SizeExprError(f"{where}: {expr!r} is not a finite number")
    if isinstance(value, (int, float)) and abs(value) > MAX_MAGNITUDE:
        raise SizeExprError(f"{where}: {expr!r} is too large (over 2**64)")
    return value


def _binop(op, a, b, expr, where):
    if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
        raise SizeExprError(f"{where}: {expr!r} divides by zero")
    if isinstance(op, ast.Pow) and (abs(b) > 64 or (b < 0 and a == 0)):
        raise SizeExprError(f"{where}: {expr!r}: an exponent must be from -64 to 64 (and 0 has "
                        "no negative power)")
    if isinstance(op, (ast.LShift, ast.RShift)) and not (isinstance(b, int) and 0 <= b <= 64):
        raise SizeExprError(f"{where}: {expr!r}: a shift must be by 0 to 64 bits")
    try:
        return _OPS[type(op)](a, b)
    except (TypeError, OverflowError) as err:
        raise SizeExprError(f"{where}: cannot evaluate {expr!r} ({err})") from None


def evaluate(expr, sizes: dict, where: str = "") -> int | float | bool:
    """Value of an int/float or an expression over the size symbols; SizeExprError otherwise,
    including division by zero, a non-finite or over-2**64 value and an expression too costly
    to evaluate (exponents and shifts are bounded, so every expression is cheap)."""
    if isinstance(expr, (int, float)):
        return _checked(expr, expr, where)

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
                not isinstance(node.value, bool):
            return _checked(node.value, expr, where)
        if isinstance(node, ast.Name) and node.id in sizes:
            return sizes[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            return _checked(_binop(node.op, left, right, expr, where), expr, where)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in _FUNCS and not node.keywords:
            args = [walk(a) for a in node.args]
            if node.func.id == "ceil_div":
                if len(args) != 2:
                    raise SizeExprError(f"{where}: {expr!r}: ceil_div takes two arguments")
                if args[1] == 0:
                    raise SizeExprError(f"{where}: {expr!r} divides by zero")
            elif node.func.id in _ONE_ARG:
                if len(args) != 1 or not isinstance(args[0], int) or args[0] < 1:
                    raise SizeExprError(f"{where}: {expr!r}: {node.func.id} takes one "
                                        "integer of at least 1")
            elif len(args) < 2:
                raise SizeExprError(f"{where}: {expr!r}: {node.func.id} takes two or more "
                                "arguments")
            return _checked(_FUNCS[node.func.id](*args), expr, where)
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            left, ok = walk(node.left), True
            for op, right in zip(node.ops, node.comparators, strict=True):
                value = walk(right)
                ok, left = ok and _COMPARE[type(op)](left, value), value
            return ok
        if isinstance(node, ast.BoolOp):
            values = [walk(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not walk(node.operand)
        if isinstance(node, ast.IfExp):  # a host launch's `c ? a : b`
            return walk(node.body) if walk(node.test) else walk(node.orelse)
        raise SizeExprError(f"{where}: cannot evaluate {expr!r}: use numbers, size names "
                        f"({', '.join(sizes)}), + - * // % / ** << >> & | ^, min, max, "
                        "ceil_div, ceil_log2, fastdiv_mult, next_pow2, comparisons, and/or/not, "
                        "a if c else b")

    text = str(expr)
    if len(text) > MAX_EXPR_CHARS:
        raise SizeExprError(f"{where}: an expression of {len(text)} characters; keep it under "
                        f"{MAX_EXPR_CHARS}")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        raise SizeExprError(f"{where}: {expr!r} is not an expression") from None
    try:
        return walk(tree)
    except RecursionError:
        raise SizeExprError(f"{where}: {expr!r} is nested too deeply") from None
