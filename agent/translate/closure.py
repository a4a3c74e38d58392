"""The device-code closure of a kernel: the file-scope items its code needs (macros, types,
constants, the device functions it calls and what those use), read from the tree-sitter AST.
The translator emits them as the port's header; ``cuda_closure`` writes them as CUDA."""

from __future__ import annotations

import re

from tree_sitter import Node

from agent.translate.tree import _device_code, _fn_name, _text, _walk


def _declared_names(n: Node, data: bytes) -> set[str]:
    """The names a file-scope item defines (not the ones it merely mentions)."""
    while n.type == "template_declaration" and n.named_children:
        n = n.named_children[-1]
    if n.type in ("preproc_def", "preproc_function_def", "struct_specifier", "class_specifier",
                  "enum_specifier", "alias_declaration", "namespace_alias_definition"):
        name = n.child_by_field_name("name")
        if name is not None and name.type == "template_type":  # a (partial) specialisation
            name = name.child_by_field_name("name")
        return {_text(name, data)} if name is not None else set()
    out = set()
    if n.type in ("declaration", "type_definition", "field_declaration"):
        for c in n.named_children:
            if c.type in ("struct_specifier", "class_specifier", "enum_specifier"):
                out |= _declared_names(c, data)
        for d in n.children_by_field_name("declarator"):
            ids = [x for x in _walk(d) if x.type in ("identifier", "type_identifier",
                                                      "field_identifier")]
            if ids:
                out.add(_text(ids[0], data))
    if n.type == "function_definition":
        name = _fn_name(n, data)
        if name:
            out.add(name)
    return out


def _leaf_names(node: Node, data: bytes) -> set[str]:
    """The tokens under ``node``; a macro's body (one ``preproc_arg`` token to tree-sitter)
    gives each identifier in it."""
    out = set()
    for n in _walk(node):
        if n.child_count == 0:
            text = _text(n, data)
            out |= set(re.findall(r"[A-Za-z_]\w*", text)) if n.type == "preproc_arg" else {text}
    return out


def header_nodes(root: Node, data: bytes, kernel: Node, callee_names: set[str],
                  callees: list[Node], named: set[str] = frozenset()) -> list[Node]:
    """File-scope items the kernel's code needs, in file order: the #defines, constants,
    structs, typedefs and template prototypes it uses (and what those use), and every
    definition or declaration of the functions it calls (overloads and specialisations)."""
    items: list[Node] = []

    def visit(parent: Node) -> None:
        for n in parent.children:
            if n.type in ("namespace_definition", "linkage_specification", "declaration_list"):
                visit(n.child_by_field_name("body") or n)
            elif n.type not in ("preproc_include", "comment", "using_declaration"):
                items.append(n)

    visit(root)
    used = set(named)  # names the kernel's template arguments use
    for fn in [kernel, *callees]:
        used |= _leaf_names(fn, data)
    # functions are kept when called, or named where code runs: in the kernel, a kept function
    # (a function pointer, a template argument) or a kept macro's body; not because a kept type
    # or constant mentions a name (that pulled host code in)
    fn_names = set(callee_names) | used
    keep: set[int] = set()
    changed = True
    while changed:  # what a kept item uses is needed too
        changed = False
        for i, n in enumerate(items):
            if i in keep:
                continue
            inner = n
            while inner.type == "template_declaration" and inner.named_children:
                inner = inner.named_children[-1]
            if inner.type == "function_definition":  # called, or named (a template argument,
                # a macro's body, a function pointer)
                # no kernel: `__launch_bounds__(...)` may come before `__global__`, so the
                # whole head counts; nodes compare by position (tree-sitter makes new objects)
                wanted = (_fn_name(inner, data) in fn_names) and \
                    _device_code(inner, data) and n.start_byte != kernel.start_byte and \
                    "__global__" not in _text(inner, data).split("{", 1)[0].split()
            else:
                wanted = bool(_declared_names(n, data) & used) and \
                    "__global__" not in _text(n, data)
            if wanted:
                keep.add(i)
                used |= _leaf_names(n, data)
                if n.type in ("preproc_def", "preproc_function_def") or \
                        inner.type == "function_definition":
                    fn_names |= _leaf_names(n, data)  # what a kept macro or function runs
                elif inner.type in ("struct_specifier", "class_specifier"):
                    fn_names |= {name for m in _walk(inner) if m.type == "function_definition"
                                 for name in _leaf_names(m, data)}  # what its methods run
                    # and its constants' initializers (a traits class's `static constexpr int
                    # kSmemSize = custom_max({...})`: compile-time code that runs)
                    fn_names |= {name for m in _walk(inner) if m.type == "field_declaration"
                                 and "constexpr" in _text(m, data).split("=")[0]
                                 for name in _leaf_names(m, data)}
                changed = True
    return [n for i, n in enumerate(items) if i in keep]
