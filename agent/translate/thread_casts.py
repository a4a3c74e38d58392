"""Pointers and references into a function's own variables (issue 16): MSL wants every pointer
and reference type to say its address space, and a local array lives in ``thread`` memory.
causal-conv1d moves vectors in and out of its local arrays through casts,
``reinterpret_cast<vec_t *>(x_vals_load)[1]``, ``reinterpret_cast<vec_t (*)[1]>(&v[4])``,
``reinterpret_cast<vec_t (&)[1]>(out_vals_store)``; each needs ``thread`` in Metal. The
emitter (emit.py) asks these two questions; the answers are read off the tree-sitter AST."""

from __future__ import annotations

from tree_sitter import Node

from agent.translate.flow import root_name

# declarators a pointer or reference hides in: `T (*)[1]`, `T (&r)[2]`
_THROUGH = ("array_declarator", "abstract_array_declarator", "parenthesized_declarator",
            "abstract_parenthesized_declarator", "init_declarator")
_SCOPES = ("compound_statement", "for_statement", "for_range_loop")


def declarator_kinds(node: Node) -> set[str]:
    """The kinds of declarator a declaration, parameter or type name declares, looking
    through arrays and parentheses: ``T (*)[1]`` gives ``abstract_pointer_declarator``."""
    out, stack = set(), [c for c in node.children if c.type.endswith("declarator")]
    while stack:
        d = stack.pop()
        out.add(d.type)
        if d.type in _THROUGH:
            inner = d.child_by_field_name("declarator")
            stack.extend([inner] if inner is not None else
                         [c for c in d.named_children if c.type.endswith("declarator")])
    return out


def in_thread_memory(operand: Node | None, data: bytes) -> bool:
    """Whether ``operand`` (what a cast converts, or a pointer's initializer) is rooted at a
    variable its function declares as a value or an array, not a pointer, reference or
    ``__shared__``/``static`` one: its memory is the thread's (``vals``, ``&vals[4]``,
    ``zeros + 1``)."""
    name = root_name(operand, data)
    if name is None:
        return False
    node = operand
    while node is not None:
        if node.type in _SCOPES:
            for decl in node.named_children:
                if decl.type == "declaration" and decl.start_byte < operand.start_byte:
                    found = _declares(decl, name, data)
                    if found is not None:
                        return found
        if node.type == "function_definition":
            return False
        node = node.parent
    return False


def _declares(decl: Node, name: str, data: bytes) -> bool | None:
    """None when ``decl`` does not declare ``name``; else whether it declares it as a value or
    an array in thread memory."""
    text = data[decl.start_byte:decl.end_byte].decode(errors="replace").split("=")[0]
    for d in decl.children_by_field_name("declarator"):
        ids = [n for n in _leaves(d) if n.type == "identifier"]
        if not ids or data[ids[0].start_byte:ids[0].end_byte].decode() != name:
            continue
        kinds = {d.type} | declarator_kinds(d)
        if kinds & {"pointer_declarator", "reference_declarator"}:
            return False
        return not any(q in text.split() for q in ("__shared__", "static", "extern",
                                                   "threadgroup", "constant", "device"))
    return None


def _leaves(node: Node) -> list[Node]:
    """The declarator's own nodes, not its initializer's nor its array size's."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        inner = n.child_by_field_name("declarator")
        if inner is not None:
            stack.append(inner)
        elif n.type.endswith("declarator"):
            stack.extend(c for c in n.named_children if c.type == "identifier"
                         or c.type.endswith("declarator"))
    return out

