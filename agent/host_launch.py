"""Launches of a kernel in its file's own host code: ``kernel<<<grid, block, smem, stream>>>(...)``
read as size expressions over the parameters of the host function that makes the launch.

llama.cpp's ``clamp_cuda(x, dst, min, max, k, stream)`` computes ``num_blocks = (k +
CUDA_CLAMP_BLOCK_SIZE - 1) / CUDA_CLAMP_BLOCK_SIZE`` and launches ``op_clamp_kernel<<<num_blocks,
CUDA_CLAMP_BLOCK_SIZE, 0, stream>>>(x, dst, min, max, k)``: the launch is ``grid = (k + 256 - 1)
// 256``, ``block = 256`` over the size ``k``, and the kernel's ``k`` is the host's ``k``. Local
constants of the host function (``const int``, ``dim3 b(x, y, z)``) and the file's object-like
macros are substituted; C's integer ``/`` becomes ``//`` and casts are dropped. A launch whose
configuration needs anything else (a runtime query, a ternary, a member of a struct) is not
used: ``problems`` says why, and the user gives --grid/--block.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import numpy as np

from agent.translate.analyze import (
    PARAMETER_NODES,
    TYPE_DTYPES,
    _text,
    _walk,
    blank_qualifier_macros,
    expand_unbalanced_macros,
)
from runners.dtypes import DTYPES
from runners.sourcetree import parse

_OBJECT_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n\\]+)$", re.M)
_CAST = re.compile(r"\(\s*(?:const\s+)?(?:unsigned\s+)?(?:int|long|long long|size_t|int64_t|"
                   r"int32_t|uint32_t|uint64_t|unsigned)\s*\)")
_STATIC_CAST = re.compile(r"\bstatic_cast\s*<[^<>]*>")
_IDENT = re.compile(r"[A-Za-z_]\w*")
# sizeof of the scalar types a launch sizes shared memory by (bytes of their MLX dtypes)
_BYTES = {name: np.dtype(DTYPES[dtype][0]).itemsize for name, dtype in TYPE_DTYPES.items()}
_SIZEOF = re.compile(r"\bsizeof\s*\(\s*(" + "|".join(
    re.escape(n).replace("\\ ", r"\s+") for n in sorted(_BYTES, key=len, reverse=True))
    + r")\s*\)")


@dataclass
class HostLaunch:
    """One launch of the kernel: where it is, the host function's parameters, and the
    configuration and arguments as size expressions over them (None where not expressible)."""

    host: str
    line: int
    params: list[str]
    grid: list[str] | None = None
    block: list[str] | None = None
    shared_mem: str | None = "0"
    args: list[str | None] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.grid is not None and self.block is not None and self.shared_mem is not None


def find_launches(src: str, kernel: str) -> list[HostLaunch]:
    """Every ``<<<...>>>`` launch of ``kernel`` (its name without template arguments) in the
    host functions of ``src``, in file order."""
    data = blank_qualifier_macros(expand_unbalanced_macros(src)).encode()
    root = parse(data, "cuda")
    macros = {m[1]: m[2].split("//")[0].strip() for m in _OBJECT_MACRO.finditer(src)}
    name = kernel.split("<")[0].strip()
    found = []
    for fn in (n for n in _walk(root) if n.type == "function_definition"):
        for call in (n for n in _walk(fn) if n.type == "call_expression"):
            config = next((c for c in call.children if c.type == "kernel_call_syntax"), None)
            callee = call.child_by_field_name("function")
            if config is None or callee is None or \
                    _text(callee, data).split("<")[0].strip() != name:
                continue
            found.append(_launch(fn, call, config, data, macros))
    return found


def _launch(fn, call, config, data: bytes, macros: dict[str, str]) -> HostLaunch:
    declarator = fn.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    params, host = [], "?"
    if declarator is not None:
        host = _text(declarator.child_by_field_name("declarator"), data)
        plist = declarator.child_by_field_name("parameters")
        for p in plist.named_children if plist else []:
            if p.type in PARAMETER_NODES:
                ids = [x for x in _walk(p) if x.type == "identifier"]
                if ids:
                    params.append(_text(ids[-1] if p.type == PARAMETER_NODES[0] else ids[0],
                                        data))
    local = _locals(fn, call.start_byte, data)
    out = HostLaunch(host, call.start_point[0] + 1, params)
    parts = [c for c in config.named_children if c.type != "comment"]
    dims = []
    for i, part in enumerate(parts[:2]):
        text = _text(part, data)
        if text in local and isinstance(local[text], list):
            dims.append([_size_expr(v, local, macros, params, out.problems) for v in local[text]])
        else:
            dims.append([_size_expr(text, local, macros, params, out.problems), "1", "1"])
        if any(d is None for d in dims[-1]):
            dims[-1] = None
        if i == 1 and dims[-1] is not None:
            out.block = dims[-1]
        elif i == 0 and dims[-1] is not None:
            out.grid = dims[-1]
    if len(parts) > 2:
        out.shared_mem = _size_expr(_text(parts[2], data), local, macros, params, out.problems)
    args = call.child_by_field_name("arguments")
    out.args = [_size_expr(_text(a, data), local, macros, params, [])
                for a in (args.named_children if args else []) if a.type != "comment"]
    return out


def _locals(fn, before: int, data: bytes) -> dict[str, str | list[str]]:
    """The host function's local values declared before byte ``before``: ``x = expr`` and
    ``dim3 x(a, b, c)`` / ``dim3 x = dim3(a, b, c)`` (a list of three)."""
    out: dict[str, str | list[str]] = {}
    for decl in (n for n in _walk(fn) if n.type == "declaration" and n.end_byte <= before):
        kind = _text(decl.child_by_field_name("type"), data) if decl.child_by_field_name(
            "type") else ""
        for vexing in (c for c in decl.named_children if c.type == "function_declarator"):
            plist = vexing.child_by_field_name("parameters")  # `dim3 g(a, b, c * d)`, read
            name = vexing.child_by_field_name("declarator")  # as a function declaration
            if "dim3" in kind and plist is not None and name is not None:
                dims = [_text(p, data) for p in plist.named_children]
                out[_text(name, data)] = (dims + ["1", "1", "1"])[:3]
        for init in (c for c in decl.named_children if c.type == "init_declarator"):
            var = init.child_by_field_name("declarator")
            value = init.child_by_field_name("value") or next(  # `dim3 g(a, b, c)`
                (c for c in init.named_children if c.type in ("argument_list",
                                                               "initializer_list")), None)
            if var is None or value is None or var.type != "identifier":
                continue
            if "dim3" in kind:
                values = value.named_children if value.type in ("argument_list",
                                                                "initializer_list") else \
                    (value.child_by_field_name("arguments").named_children
                     if value.type == "call_expression" and value.child_by_field_name(
                        "arguments") else [value])
                dims = [_text(v, data) for v in values]
                out[_text(var, data)] = (dims + ["1", "1", "1"])[:3]
            else:
                out[_text(var, data)] = _text(value, data)
    return out


def size_names(exprs: list[str]) -> list[str]:
    """The size names size expressions ``exprs`` use (not their functions), in order."""
    seen = []
    for expr in exprs:
        for node in ast.walk(ast.parse(str(expr).strip(), mode="eval")):
            if isinstance(node, ast.Name) and node.id not in ("min", "max", "ceil_div") and \
                    node.id not in seen:
                seen.append(node.id)
    return seen


def _size_expr(text: str, local: dict, macros: dict[str, str], params: list[str],
               problems: list[str]) -> str | None:
    """``text`` as a size expression over ``params``, or None (a reason in ``problems``)."""
    for _ in range(8):  # locals and macros, a few levels deep
        changed = False

        def sub(m: re.Match) -> str:
            nonlocal changed
            value = local.get(m[0], macros.get(m[0]))
            if isinstance(value, str) and m[0] not in params:
                changed = True
                return f"({value})"
            return m[0]

        text = _IDENT.sub(sub, text)
        if not changed:
            break
    text = _SIZEOF.sub(lambda m: str(_BYTES[" ".join(m[1].split())]), text)
    text = _STATIC_CAST.sub("", _CAST.sub("", text))
    text = re.sub(r"\bstd::(min|max)\b", r"\1", text)
    text = re.sub(r"(?<![/])/(?![/])", "//", text)  # C integer division
    text = re.sub(r"(\d+)[uUlL]+\b", r"\1", text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        problems.append(f"cannot read {text.strip()!r} as a size expression")
        return None
    names = set(size_names([text.strip()]))
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load,
               ast.Call, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub,
               ast.LShift, ast.RShift)
    if not all(isinstance(n, allowed) for n in ast.walk(tree)) or names - set(params):
        problems.append(f"{text.strip()!r} depends on "
                        f"{', '.join(sorted(names - set(params))) or 'what sizes cannot say'}")
        return None
    return " ".join(text.split())
