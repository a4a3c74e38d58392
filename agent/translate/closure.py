"""The device-code closure of a kernel: the file-scope items its code needs (macros, types,
constants, the device functions it calls and what those use), read from the tree-sitter AST.
The translator emits them as the port's header; ``cuda_closure`` writes them as CUDA."""

from __future__ import annotations

import re
from functools import cache

from tree_sitter import Node

from agent.translate.namespaces import enclosing, qualified
from agent.translate.specialisations import Selection
from agent.translate.tree import _device_code, _fn_name, _text, _walk
from runners.simbuild import INCLUDE

_BUILTIN_TYPES = frozenset({"void", "bool", "char", "short", "int", "long", "float", "double",
                            "signed", "unsigned", "auto"})
# names every C++ toolchain declares; kport's CUDA headers declare the rest (toolchain_names)
_STANDARD = frozenset({"std"})


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
            # not a builtin type: `INSTANTIATE_PAD_DATA(float);` (a macro's use at file
            # scope) reads as a declaration of `float`
            if ids and _text(ids[0], data) not in _BUILTIN_TYPES:
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


@cache
def toolchain_names() -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """(each namespace kport's own CUDA and Metal headers declare -> the words of the headers
    that declare it, every word their code spells): what a kernel's build gets from the
    toolchain (cub::BlockReduce, c10::complex; float2, __half, whose declarations macros
    paste)."""
    spaces: dict[str, set[str]] = {}
    words = set(_STANDARD)
    for header in sorted(INCLUDE.rglob("*")):
        if header.is_file():
            code = re.sub(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"", " ",
                          header.read_text(errors="replace"), flags=re.S)  # code, not prose
            spelled = set(re.findall(r"[A-Za-z_]\w*", code))
            for name in re.findall(r"\bnamespace\s+([A-Za-z_]\w*)", code):
                spaces.setdefault(name, set()).update(spelled)
            words |= spelled
    return {name: frozenset(w) for name, w in spaces.items()}, frozenset(words)


def _signature(n: Node) -> list[Node]:
    """Where a specialisation or an overload says which types it is for: a specialisation's
    template arguments (`_typeConvert<c10::Half>`), a function's head (return and parameter
    types); [] for other items."""
    inner = n
    while inner.type == "template_declaration" and inner.named_children:
        inner = inner.named_children[-1]
    if inner.type == "function_definition":
        body = inner.child_by_field_name("body")
        return [c for c in inner.children if c is not body and c.type != "compound_statement"]
    if inner.type in ("struct_specifier", "class_specifier"):
        name = inner.child_by_field_name("name")
        if name is not None and name.type == "template_type":
            return [name.child_by_field_name("arguments")]
    return []


def _foreign(n: Node, data: bytes, known: set[str]) -> set[str]:
    """The types in ``n``'s signature (_signature) that neither the source nor the toolchain
    declares, as spelled (`c10::Half`: kport's headers have a c10, but no Half in it): types
    of a header kport read as empty."""
    spaces, words = toolchain_names()
    out = set()
    for part in _signature(n):
        for m in _walk(part):
            if m.type == "qualified_identifier" and m.parent.type != "qualified_identifier":
                scope = m.child_by_field_name("scope")
                names = re.sub(r"<.*", "", _text(m, data)).replace(" ", "").split("::")
                if scope is None or scope.type != "namespace_identifier" or \
                        names[0] in known or names[0] in _STANDARD:
                    continue
                if names[-1] not in spaces.get(names[0], ()):
                    out.add("::".join(names))
            elif m.type == "type_identifier" and m.parent.type != "qualified_identifier" and \
                    _text(m, data) not in words and _text(m, data) not in known:
                out.add(_text(m, data))
    return out


def _using(n: Node, data: bytes) -> tuple[str, bool] | None:
    """(what a `using` names, whether it is a namespace: `using namespace vllm;` or `using
    vllm::fp8::scaled_convert;`); None for other items."""
    if n.type != "using_declaration" or not n.named_children:
        return None
    return _text(n.named_children[-1], data), any(c.type == "namespace" for c in n.children)


def _namespaces(nodes: list[Node], data: bytes) -> set[str]:
    """The qualified names (and their prefixes, `a` and `a::b`) of the namespaces that enclose
    ``nodes``."""
    out = set()
    for n in nodes:
        chain = enclosing(n)
        out |= {qualified(chain[:i + 1], data) for i in range(len(chain))}
    return out - {""}


def header_nodes(root: Node, data: bytes, kernel: Node, callee_names: set[str],
                  callees: list[Node], named: set[str] = frozenset(), *, known: set[str],
                  where: str = "<source>", bindings: dict[str, str] | None = None) -> list[Node]:
    """File-scope items the kernel's code needs, in file order: the #defines, constants,
    structs, typedefs and template prototypes it uses (and what those use), every
    definition or declaration of the functions it calls (overloads and specialisations), and
    the ``using`` lines of the namespaces they are in. A specialisation or overload for a
    type nothing declares (``known``: the source's names; and the toolchain's) is left out:
    its header was read as empty and this instantiation does not use it; so is one no call in
    the kept code selects (specialisations.py; ``bindings``: the kernel's template parameters
    -> their arguments as spelled). TranslateError when
    the kept code does use such a type, or when it is a called function's only definition."""
    items: list[Node] = []

    def visit(parent: Node) -> None:
        for n in parent.children:
            if n.type in ("namespace_definition", "linkage_specification", "declaration_list"):
                visit(n.child_by_field_name("body") or n)
            elif n.type not in ("preproc_include", "comment"):
                items.append(n)

    visit(root)
    # a macro may declare what nothing else does (`DEFINE_VEC(float4_t)`)
    known = set(known) | {w for n in items if n.type in ("preproc_def", "preproc_function_def")
                          for w in _leaf_names(n, data)}
    foreign = {i: names for i, n in enumerate(items) if (names := _foreign(n, data, known))}
    unused = {items[i].start_byte for i in foreign}
    used = set(named)  # names the kernel's template arguments use
    for fn in [kernel, *callees]:
        if fn.start_byte not in unused:  # a callee's first overload may be one left out
            used |= _leaf_names(fn, data)
    usings = {i: u for i, n in enumerate(items) if (u := _using(n, data))}
    # functions are kept when called, or named where code runs: in the kernel, a kept function
    # (a function pointer, a template argument) or a kept macro's body; not because a kept type
    # or constant mentions a name (that pulled host code in)
    fn_names = set(callee_names) | used
    keep: set[int] = set()
    left_out: set[int] = set()  # wanted, but for a type of a header read as empty
    selection = Selection(items, data, kernel, bindings or {})
    changed = True
    while changed:  # what a kept item uses is needed too
        changed = False
        unselected = selection.unused([items[i] for i in sorted(keep)])
        for i, n in enumerate(items):
            if i in keep or i in left_out or (i in usings and usings[i][1]):
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
                    n.start_byte not in unselected and \
                    "__global__" not in _text(inner, data).split("{", 1)[0].split()
            elif i in usings:  # `using vllm::helper;`: kept where its namespace is the source's
                scope, _, member = usings[i][0].rpartition("::")
                wanted = member in used and scope.split("::")[0] in known
            else:
                wanted = bool(_declared_names(n, data) & used) and \
                    "__global__" not in _text(n, data)
            if wanted and i in foreign:
                left_out.add(i)
            elif wanted:
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
    _check_left_out([items[i] for i in sorted(left_out)], [items[i] for i in keep],
                    foreign_of={items[i].start_byte: foreign[i] for i in left_out},
                    used=used, data=data, where=where)
    # `using namespace vllm;` where the kept items' namespaces are
    spaces = _namespaces([*(items[i] for i in keep), kernel], data)
    keep |= {i for i, (target, space) in usings.items()
             if space and any(s == target or s.endswith("::" + target) for s in spaces)}
    return [n for i, n in enumerate(items) if i in keep]


def _check_left_out(left_out: list[Node], kept: list[Node], *, foreign_of: dict[int, set[str]],
                    used: set[str], data: bytes, where: str) -> None:
    """Raise TranslateError when a left-out item (a specialisation or overload for a type no
    header declares) is one the kept code needs: the kept code names its type, or it is the
    only definition of a function the code calls."""
    kept_functions = {_fn_name(n.named_children[-1] if n.type == "template_declaration" else n,
                               data) for n in kept}
    for n in left_out:
        inner = n
        while inner.type == "template_declaration" and inner.named_children:
            inner = inner.named_children[-1]
        names = foreign_of[n.start_byte]
        if named := {name for name in names if name.rpartition("::")[2] in used}:
            why = f"the kept code names {', '.join(sorted(named))}"
        elif inner.type == "function_definition" and _fn_name(inner, data) not in kept_functions:
            why = f"it is the only definition of {_fn_name(inner, data)}, which the code calls"
        else:
            continue
        from agent.translate.analyze import TranslateError  # lazy: analyze imports this module
        head = " ".join(_text(inner, data).split("{", 1)[0].split())
        raise TranslateError(
            f"{where}: `{head}` is for {', '.join(sorted(names))}, which neither the source nor "
            "kport's CUDA headers declare (a header read as empty: a host library), so the "
            f"kernel's device code leaves it out; but {why}; pass -I with the folder that "
            "declares it, or port an instantiation that does not use it")
