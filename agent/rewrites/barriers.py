"""Narrowing barrier memory flags: ``threadgroup_barrier(mem_flags::mem_device |
mem_flags::mem_threadgroup)`` (what the translator writes for ``__syncthreads()``) becomes
``threadgroup_barrier(mem_flags::mem_threadgroup)`` when the analysis proves the device fence
orders nothing.

The analysis: a device-memory fence at a barrier matters only when one thread writes device
memory before it and another thread of the group reads that memory after it. Inputs are
``const device`` (never written), and MLX gives each output its own buffer, so device memory
written by the kernel is reachable only through the outputs. It is safe when the body never
reads an output: every use of an output, or of a pointer derived from one (``device float*
dst = y + row * n``, followed transitively), is the pointer of a plain store (``dst[i] = ...``,
``*p = ...``) or the start of another derived pointer. Anything else — a load, a compound
assignment (``+=`` reads), an atomic, the address taken, a pointer passed to a function — is
a read or may hide one, and the rewrite refuses.
"""

from __future__ import annotations

from tree_sitter import Node

from agent.rewrites.source import Edit, Unit, rewrite, units, walk
from corpus.candidate import Candidate

DEVICE, GROUP = "mem_flags::mem_device", "mem_flags::mem_threadgroup"
_DECLARATORS = {"pointer_declarator", "reference_declarator", "array_declarator"}
_THROUGH = {"parenthesized_expression", "cast_expression", "binary_expression"}


def _declared(declarator: Node, unit: Unit) -> str | None:
    """The name a declarator declares (through pointer, reference and array declarators)."""
    while declarator.type != "identifier":
        inner = declarator.child_by_field_name("declarator")
        if inner is None:
            return None
        declarator = inner
    return unit.text(declarator)


def _use(ident: Node, unit: Unit) -> tuple[str, str | None]:
    """How the body uses a tracked pointer at ``ident``: ('store', None), ('alias', name of
    the pointer it starts), ('declared', None) or ('read', what it is)."""
    node = ident
    while node.parent is not None and node.parent.type in _THROUGH:
        node = node.parent
    parent = node.parent
    if parent.type in _DECLARATORS or (parent.type == "init_declarator"
                                       and parent.child_by_field_name("declarator") == node):
        return "declared", None
    if parent.type == "init_declarator" and parent.child_by_field_name("value") == node:
        return "alias", _declared(parent.child_by_field_name("declarator"), unit)
    if parent.type == "assignment_expression" and parent.child_by_field_name("right") == node \
            and unit.text(parent.child_by_field_name("operator")) == "=" \
            and parent.child_by_field_name("left").type == "identifier":
        return "alias", unit.text(parent.child_by_field_name("left"))
    deref = parent.type == "subscript_expression" and \
        parent.child_by_field_name("argument") == node
    deref = deref or (parent.type == "pointer_expression" and unit.text(parent.children[0])
                      == "*")
    if not deref:
        return "read", f"{parent.type} at line {ident.start_point[0]}"
    target = parent
    while target.parent is not None and target.parent.type == "parenthesized_expression":
        target = target.parent
    owner = target.parent
    if owner is not None and owner.type == "assignment_expression" and \
            owner.child_by_field_name("left") == target and \
            unit.text(owner.child_by_field_name("operator")) == "=":
        return "store", None
    return "read", f"`{unit.text(owner or target)[:60]}`"


def output_reads(cand: Candidate) -> str | None:
    """Why the body may read device memory it writes (the first use that is not a plain
    store through an output or a pointer derived from one); None when it never does."""
    body = next(u for u in units(cand) if u.part == "body")
    tracked = {cand.names.get(o, o) for o in cand.outputs}
    idents = [n for n in walk(body.root) if n.type == "identifier"]
    seen: set[int] = set()
    while True:
        grew = False
        for ident in idents:
            if ident.start_byte in seen or body.text(ident) not in tracked:
                continue
            seen.add(ident.start_byte)
            kind, what = _use(ident, body)
            if kind == "read":
                return f"output pointer {body.text(ident)} used as {what}"
            if kind == "alias":
                if what is None:
                    return f"output pointer {body.text(ident)} stored where it cannot be traced"
                if what not in tracked:
                    tracked.add(what)
                    grew = True
        if not grew:
            return None


def _flag_edits(unit: Unit) -> list[Edit]:
    edits = []
    for call in walk(unit.root):
        if call.type != "call_expression" or \
                unit.text(call.child_by_field_name("function")) != "threadgroup_barrier":
            continue
        args = call.child_by_field_name("arguments").named_children
        if len(args) != 1 or args[0].type != "binary_expression":
            continue
        flags = {unit.text(args[0].child_by_field_name(f)).replace(" ", "")
                 for f in ("left", "right")}
        if unit.text(args[0].child_by_field_name("operator")) == "|" and \
                flags == {DEVICE, GROUP}:
            edits.append((args[0].start_byte, args[0].end_byte, GROUP))
    return edits


def narrow_barriers(cand: Candidate) -> Candidate | None:
    """``cand`` with its device-and-threadgroup barriers narrowed to threadgroup memory when
    ``output_reads`` finds no read of written device memory; None when it finds one or the
    kernel has no such barrier."""
    if not any(_flag_edits(u) for u in units(cand)) or output_reads(cand) is not None:
        return None
    return rewrite(cand, _flag_edits)
