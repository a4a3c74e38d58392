"""What a guessed case keeps between its sizes and how it fills index data (issue 15): the
relations among the given sizes (agent/size_relations.py) read from the launch, the kernel's
body and the values, and the integer inputs the kernel reads as CSR offsets, which take the
init ``offsets:END`` (sorted offsets from 0 to END, corpus/check.py) instead of random indices
that no host would pass."""

from __future__ import annotations

import ast
import math

from agent.kernel_reads import Offsets, read_kernel
from agent.size_relations import SizeRelations, find_relations


def size_contracts(src: str, kernel: str, args: list[dict], sizes: dict[str, int],
                   launch: tuple, template: dict, guessed: list[str]) -> SizeRelations:
    """The relations among ``sizes`` (listed in ``guessed``); sets the init of each integer
    input ``kernel`` reads as offsets (``args``: the case's, changed in place). ``launch``:
    (grid, block, dynamic shared bytes) as size expressions."""
    grid, block, smem = launch
    params = [a["name"] for a in args]
    integer_inputs = [a["name"] for a in args if a["role"] == "in" and not a.get("null")
                      and not a.get("fields") and a["dtype"].startswith(("int", "uint"))]
    reads = read_kernel(src, kernel, params, integer_inputs)
    bound_to = {a["name"]: a["value"] for a in args if a["role"] == "scalar"
                and isinstance(a.get("value"), str) and a["value"] in sizes}
    exprs = [str(e) for e in (*grid, *block, smem or 0)] + [
        str(a["value"]) for a in args if a["role"] == "scalar" and isinstance(a.get("value"), str)]
    quotients = _quotients(exprs, sizes) | {
        (bound_to[a], bound_to[b]) for a, b in reads.quotients if a in bound_to and b in bound_to}
    constants = {v for v in template.values() if isinstance(v, int) and v >= 2}
    relations = find_relations(sizes, quotients, constants)
    if relations.relations:
        guessed.append(f"size relations kept in every size set kport makes: "
                       f"{relations.describe()}")
    used = {n for n in sizes if any(n in _names(str(e)) for e in (*grid, *block, smem or 0))
            } | {v for p, v in bound_to.items() if p in reads.read} | {
        n for a in args for n in _field_sizes(a.get("fields") or [], sizes)}
    free = [n for n in sizes if n not in used]  # counts that reach the kernel only as data
    by_name = {a["name"]: a for a in args}
    for o in reads.offsets:
        end = _end(o, free, sizes, grid, block, bound_to)
        by_name[o.name]["init"] = f"offsets:{end}"
        guessed.append(f"{o.name}: CSR offsets (the kernel reads {o.name}[e] and "
                       f"{o.name}[e + 1] as one segment's ends), filled with sorted offsets "
                       f"from 0 to {end}")
    return relations


def variant_sizes(sizes: dict[str, int], relations: SizeRelations) -> dict[str, int]:
    """The second size set: each free size over 8 made odd (a power-of-two factor kept, byte
    strides stay whole elements), the relations kept; only the sizes that change."""
    proposal = {**sizes, **{k: _odd(sizes[k]) for k in relations.free() if sizes[k] > 8}}
    return {k: v for k, v in relations.keep(proposal).items() if v != sizes[k]}


def _odd(v: int) -> int:
    unit = math.gcd(v, 16)
    return max(unit, (v - v // 4 - 1) // unit * unit)


def _end(o: Offsets, free: list[str], sizes: dict[str, int], grid, block,
         bound_to: dict[str, str]) -> str:
    """The last offset of ``o``: a segment that bounds a loop spans rows of data the host
    counts (the next size the kernel never reads itself: torch-cluster's M for y); one a
    thread coordinate is tested against spans that coordinate's range (blockIdx.x: the grid);
    otherwise the largest size."""
    largest = max(sizes, key=lambda n: sizes[n])
    if o.loop:
        return free.pop(0) if free else largest
    kind, where = o.coordinate or ("", 0)
    if kind == "param":
        return bound_to.get(where, largest)
    if kind not in ("block", "thread", "global") or where >= min(len(grid), len(block)):
        return largest
    dims = [str(d).strip() for d in {"block": [grid[where]], "thread": [block[where]],
                                     "global": [grid[where], block[where]]}[kind]]
    return " * ".join(d if d.isidentifier() or d.isdigit() else f"({d})" for d in dims)


def _field_sizes(fields: list[dict], sizes: dict[str, int]) -> set[str]:
    """The sizes a struct argument's field values name (nested structs too)."""
    out = set()
    for f in fields:
        out |= _field_sizes(f.get("fields") or [], sizes)
        values = f.get("value") if isinstance(f.get("value"), list) else [f.get("value")]
        out |= {n for v in values if isinstance(v, str) for n in _names(v) if n in sizes}
    return out


def _parsed(expr: str) -> list[ast.AST]:
    """The nodes of a size expression; none when it does not parse (the case's own check
    names it later)."""
    try:
        return list(ast.walk(ast.parse(expr.strip(), mode="eval")))
    except SyntaxError:
        return []


def _names(expr: str) -> set[str]:
    return {n.id for n in _parsed(expr) if isinstance(n, ast.Name)}


def _quotients(exprs: list[str], sizes: dict[str, int]) -> set[tuple[str, str]]:
    """(a, b) for each ``a / b``, ``a // b`` or ``a % b`` of two sizes in ``exprs``."""
    out = set()
    for expr in exprs:
        for n in _parsed(expr):
            if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv, ast.Mod)) \
                    and isinstance(n.left, ast.Name) and isinstance(n.right, ast.Name) and \
                    n.left.id in sizes and n.right.id in sizes:
                out.add((n.left.id, n.right.id))
    return out
