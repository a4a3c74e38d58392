"""Vector loads and stores: an elementwise kernel that gives each thread one element becomes
one that gives each thread four consecutive elements, read and written as ``float4`` (``half4``,
``int4`` ...) vectors, with the last partial vector done element by element (apple-gpu-facts
F7: one vector access per lane instead of four scalar ones).

Exactly this shape or nothing, in the body's top-level statements:

    T i = <the thread's global x index>;      // thread_position_in_grid.x, or group * width + lane
    if (i < N) S                              // no else; the last statement

where S reads inputs only as ``x[i]``, writes outputs only as ``y[i] = ...;`` statements at its
top level (every element is written, so every vector component is), and uses no thread
position, SIMD-group function, barrier, atomic, ``return``, ``break``, ``continue`` or
``goto``. It becomes four copies of S, each with its own ``i`` and the buffer accesses replaced
by vector components, the grid shrunk to a quarter (rounded up to whole threadgroups), and a
tail loop of S for the elements past the last whole vector.

The rewrite assumes what the CUDA source may not have: every buffer starts 16-byte aligned.
MLX allocates arrays so, but passes a row-contiguous slice with its offset
(shared/reference/mlx-metal-kernel.md, ``ensure_row_contiguous``), so ``x[1:]`` breaks it; what
an Apple GPU does with a misaligned vector load is unconfirmed. An input of fewer than 8
elements is ``constant`` memory in MLX, where the ``device`` vector cast does not compile (an
overload per address space would be MSL, but metal_sim erases the spaces in the compile that
runs, so it could not check one): the rewrite applies only where every input it reads as vectors
has 8 elements or more at every size set of the case. The report shows the action's title,
which states both assumptions.
"""

from __future__ import annotations

import math

from tree_sitter import Node

from agent.rewrites.source import Unit, strip, units, walk
from corpus.candidate import Candidate
from corpus.cases import CaseError, evaluate

WIDTH = 4
# case dtype -> the MSL scalar type whose 4-vector the rewrite reads and writes
SCALARS = {"float32": "float", "float16": "half", "bfloat16": "bfloat", "int32": "int",
           "uint32": "uint", "int16": "short", "uint16": "ushort"}
INDEX_TYPES = frozenset({"int", "uint", "long", "ulong", "size_t"})
# identifiers that tie a statement to its thread or its group: S may use none of them
FORBIDDEN = ("thread_position", "threadgroup_position", "threads_per", "thread_index",
             "simdgroup", "simd_", "quad_", "threadgroup_barrier", "simdgroup_barrier",
             "atomic", "threadgroups_per_grid", "dispatch_")
JUMPS = frozenset({"return_statement", "break_statement", "continue_statement",
                   "goto_statement"})
TITLE = ("vector loads and stores: 4 elements a thread (assumes 16-byte aligned buffers, "
         "inputs of 8 or more elements)")
# MLX passes an input of fewer elements as `constant` memory, where a `device` vector cast does
# not compile (shared/reference/mlx-metal-kernel.md)
SMALLEST_DEVICE_INPUT = 8


def _field(node: Node, name: str, unit: Unit) -> str:
    child = node.child_by_field_name(name)
    return "" if child is None else unit.text(child)


def _global_x(node: Node, unit: Unit) -> bool:
    """``thread_position_in_grid.x`` or ``threadgroup_position_in_grid.x *
    threads_per_threadgroup.x + thread_position_in_threadgroup.x`` (either operand order)."""
    node = strip(node, unit)
    if "".join(unit.text(node).split()) == "thread_position_in_grid.x":
        return True
    if node.type != "binary_expression" or _field(node, "operator", unit) != "+":
        return False
    sides = [strip(node.child_by_field_name(f), unit) for f in ("left", "right")]
    lane = [s for s in sides if "".join(unit.text(s).split()) == "thread_position_in_threadgroup.x"]
    group = [s for s in sides if s.type == "binary_expression"
             and _field(s, "operator", unit) == "*"]
    if len(lane) != 1 or len(group) != 1:
        return False
    factors = sorted("".join(unit.text(strip(group[0].child_by_field_name(f), unit)).split())
                     for f in ("left", "right"))
    return factors == ["threadgroup_position_in_grid.x", "threads_per_threadgroup.x"]


def _index_declaration(stmt: Node, unit: Unit) -> tuple[str, str, Node] | None:
    """(type, name, value) of ``T i = <global x index>;``."""
    if stmt.type != "declaration" or stmt.has_error:
        return None
    decls = [c for c in stmt.named_children if c.type == "init_declarator"]
    if len(decls) != 1 or _field(stmt, "type", unit) not in INDEX_TYPES:
        return None
    value = decls[0].child_by_field_name("value")
    name = decls[0].child_by_field_name("declarator")
    if value is None or name is None or name.type != "identifier" or not _global_x(value, unit):
        return None
    return _field(stmt, "type", unit), unit.text(name), value


def _uses(node: Node, unit: Unit, name: str) -> bool:
    return any(n.type == "identifier" and unit.text(n) == name for n in walk(node))


def _statements(body: Node) -> list[Node]:
    return [c for c in body.named_children if c.type != "comment"]


def _accesses(stmt: Node, unit: Unit, index: str, inputs: set[str],
              outputs: set[str]) -> dict[Node, str] | None:
    """Each buffer access of S (the subscript node -> its buffer), or None when S does
    anything else with a buffer, its index or its thread (see the module docstring)."""
    top = _statements(stmt) if stmt.type == "compound_statement" else [stmt]
    found, written = {}, set()
    for n in walk(stmt):
        if n.type in JUMPS or n.type == "ERROR" or n.is_missing:
            return None
        text = unit.text(n)
        if n.type == "identifier" and any(text.startswith(f) for f in FORBIDDEN):
            return None
        if n.type != "identifier" or text not in inputs | outputs:
            continue
        sub = n.parent
        if sub is None or sub.type != "subscript_expression" or \
                sub.child_by_field_name("argument") != n:
            return None
        idx = sub.child_by_field_name("indices")
        if idx is None or "".join(unit.text(idx).split()) not in (f"[{index}]", index):
            return None
        parent = sub.parent
        assigned = parent is not None and parent.type == "assignment_expression" and \
            parent.child_by_field_name("left") == sub
        if text in outputs:
            if not assigned or _field(parent, "operator", unit) != "=" or \
                    parent.parent is None or parent.parent not in top or \
                    parent.parent.type != "expression_statement":
                return None
            written.add(text)
        elif assigned or (parent is not None and parent.type in {"update_expression",
                                                                  "pointer_expression"}):
            return None
        found[sub] = text
    return found if written else None


def _component(stmt: Node, unit: Unit, accesses: dict[Node, str], names: dict[str, str],
               k: int) -> str:
    """S's text with every buffer access replaced by component ``k`` of its vector."""
    edits = sorted(((s.start_byte, s.end_byte, f"{names[b]}[{k}]") for s, b in accesses.items()),
                   reverse=True)
    data = unit.data[stmt.start_byte:stmt.end_byte]
    for start, end, new in edits:
        data = data[:start - stmt.start_byte] + new.encode() + data[end - stmt.start_byte:]
    return data.decode()


def _buffers(cand: Candidate, case) -> dict[str, tuple[str, int]] | None:
    """The kernel-visible name -> (MSL scalar type, fewest elements over the case's size sets)
    of every buffer the candidate binds; None when one has a dtype without a 4-vector here, a
    name the case lacks or a shape that does not evaluate."""
    by_name = {a.name: a for a in case.args}
    out = {}
    for name in cand.inputs + cand.outputs:
        arg = by_name.get(name) or by_name.get(name.removesuffix("_out"))
        if arg is None:
            return None
        if arg.role == "scalar":
            continue
        if arg.dtype not in SCALARS:
            return None
        try:
            fewest = min(math.prod(int(evaluate(d, sizes)) for d in arg.shape)
                         for sizes in case.size_sets())
        except CaseError:
            return None
        out[cand.names.get(name, name)] = (SCALARS[arg.dtype], fewest)
    return out


def _one(expr) -> bool:
    """Whether a launch expression is 1 whatever the sizes (it names none)."""
    try:
        return evaluate(expr, {}) == 1
    except CaseError:
        return False


def _grid(cand: Candidate) -> list | None:
    """The launch's grid with x a quarter (rounded up to whole threadgroups); None unless
    the grid is one-dimensional."""
    if not cand.grid or not cand.threadgroup or \
            not all(_one(e) for e in cand.grid[1:] + cand.threadgroup[1:]):
        return None
    width = cand.threadgroup[0]
    return [f"ceil_div(ceil_div({cand.grid[0]}, {WIDTH}), {width}) * {width}"] + \
        list(cand.grid[1:])


def vector_accesses(cand: Candidate, case) -> Candidate | None:
    """``cand`` with vector loads and stores (the module docstring's shape), or None."""
    buffers, grid = _buffers(cand, case), _grid(cand)
    if buffers is None or grid is None or cand.atomic_outputs:
        return None
    types = {b: t for b, (t, _) in buffers.items()}
    outputs = {cand.names.get(o, o) for o in cand.outputs}
    inputs = set(types) - outputs
    unit = units(cand)[-1]
    body = unit.root.named_children[0].child_by_field_name("body")
    stmts = _statements(body) if body is not None else []
    found = [(j, d) for j, s in enumerate(stmts) if (d := _index_declaration(s, unit))]
    if len(found) != 1 or found[0][0] != len(stmts) - 2:
        return None
    j, (itype, index, value) = found[0]
    if any(n.type == "identifier" and unit.text(n).startswith(FORBIDDEN)
           for s in stmts[:j] for n in walk(s)):
        return None  # a value of the thread's position would change meaning with the grid
    guard = stmts[-1]
    cond = guard.child_by_field_name("condition")
    then = guard.child_by_field_name("consequence")
    if guard.type != "if_statement" or guard.child_by_field_name("alternative") or \
            cond is None or then is None or guard.has_error:
        return None
    if cond.type == "condition_clause" and cond.child_by_field_name("value") is not None:
        cond = cond.child_by_field_name("value")
    cond = strip(cond, unit)
    bound = cond.child_by_field_name("right")
    if cond.type != "binary_expression" or _field(cond, "operator", unit) != "<" or \
            unit.text(strip(cond.child_by_field_name("left"), unit)) != index or \
            _uses(bound, unit, index) or \
            any(n.type == "identifier" and unit.text(n).startswith(FORBIDDEN)
                for n in walk(bound)):
        return None
    accesses = _accesses(then, unit, index, inputs, outputs)
    if accesses is None:
        return None
    used = sorted(set(accesses.values()))
    if any(buffers[b][1] < SMALLEST_DEVICE_INPUT for b in used if b in inputs):
        return None
    vec = {b: f"kp_vec_{b}" for b in used}
    n = unit.text(bound)
    lines = [unit.text(s) for s in stmts[:j]] + [
        f"// {WIDTH} consecutive elements a thread, read and written as vectors (kport's "
        "vector rewrite: assumes 16-byte aligned buffers)",
        f"const {itype} kp_vector = {unit.text(value)};",
        f"if ({WIDTH} * kp_vector + {WIDTH - 1} < ({n})) {{"]
    lines += [f"  const {types[b]}{WIDTH} {vec[b]} = reinterpret_cast<const device "
              f"{types[b]}{WIDTH}*>({b})[kp_vector];" for b in used if b in inputs]
    lines += [f"  {types[b]}{WIDTH} {vec[b]};" for b in used if b in outputs]
    # S's own uses of the index (beyond the accesses replaced) need it declared
    own = sum(n.type == "identifier" and unit.text(n) == index for n in walk(then)) > \
        len(accesses)
    for k in range(WIDTH):
        declare = f"const {itype} {index} = {WIDTH} * kp_vector + {k}; " if own else ""
        lines.append(f"  {{ {declare}{_component(then, unit, accesses, vec, k)} }}")
    lines += [f"  reinterpret_cast<device {types[b]}{WIDTH}*>({b})[kp_vector] = {vec[b]};"
              for b in used if b in outputs]
    lines += ["} else {",
              f"  for ({itype} {index} = {WIDTH} * kp_vector; {index} < ({n}); ++{index}) "
              f"{unit.text(then)}", "}"]
    return cand.model_copy(update={"body": "\n".join(lines) + "\n", "grid": grid})
