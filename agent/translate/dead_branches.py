"""The ``if constexpr`` branches an instantiation never takes, dropped before translation.

In a C++ template the discarded branch is not instantiated; the Metal port of a kernel is no
template over its traits (``Ktraits`` is bound by a ``#define``), so its compiler checks both
branches, and mamba's selective scan's complex branch (``A_val[r].real_ *= kLog2e`` on a
float, ``c10::complex`` arithmetic) does not compile there. A branch whose condition folds at
port time (template arguments, constexpr locals, a traits class's members, type comparisons:
traits.py) is dropped from the kernel, and so from what the kernel is found to call and read:
its helpers, the pointer fields it names. A function template every call of which in the kept
code names the same template arguments is ported for them and pruned the same way. Lines are
kept (a dropped branch keeps its newlines), so TODOs still name the source's lines."""

from __future__ import annotations

from tree_sitter import Node

from agent.translate.flow import callee_name
from agent.translate.folding import Lookup, Value, constexpr_values, fold
from agent.translate.macros import split_template_args
from agent.translate.traits import Instantiation
from agent.translate.tree import _fn_name, _text, _walk


def prune(data: bytes, root: Node, kernel: Node, bindings: dict[str, str],
          template: list[tuple[str, object]]) -> bytes:
    """``data`` with the ``if constexpr`` branches that the kernel ``kernel`` (its
    function_definition) and the function templates it instantiates once never take
    blanked; ``bindings``: the kernel's template parameters -> their arguments as spelled,
    ``template``: their values (ints and bools fold)."""
    inst = Instantiation(root, data, bindings, kernel.child_by_field_name("body"))
    known = {k: v for k, v in template if isinstance(v, (bool, int))}
    edits = _edits(kernel, data, known, inst.lookup)
    for fn, scope in _instantiated_once(root, data, kernel, inst, edits):
        edits += _edits(fn, data, {k: v for k, s in scope.items()
                                   if (v := _value_text(s)) is not None},
                        inst.for_scope(scope))
    out, pos = [], 0
    for start, end, text in sorted(edits):
        if start < pos:
            continue  # inside a branch already dropped
        out += [data[pos:start], text.encode()]
        pos = end
    return b"".join(out) + data[pos:]


def _edits(fn: Node, data: bytes, known: dict[str, Value], lookup: Lookup
           ) -> list[tuple[int, int, str]]:
    """The blanks that drop ``fn``'s dead ``if constexpr`` branches."""
    constants = constexpr_values(fn, data, known, lookup)
    edits: list[tuple[int, int, str]] = []

    def visit(n: Node) -> None:
        if n.type == "if_statement" and any(c.type == "constexpr" for c in n.children):
            cond = n.child_by_field_name("condition")
            value = fold(cond.named_children[-1] if cond is not None and cond.named_children
                         else None, data, constants, lookup)
            yes, no = n.child_by_field_name("consequence"), n.child_by_field_name("alternative")
            if value is not None and yes is not None:
                dead, live = (no, yes) if value else (yes, no)
                if dead is not None:
                    edits.append((dead.start_byte, dead.end_byte, _blank(
                        dead, data, "{}" if dead.type == "compound_statement" or dead is yes
                        else "")))
                if live is not None:
                    visit(live)
                return
        for c in n.children:
            visit(c)

    body = fn.child_by_field_name("body")
    if body is not None:
        visit(body)
    return edits


def _blank(node: Node, data: bytes, keep: str) -> str:
    """What replaces a dropped branch: ``keep`` (``{}`` for a block) and its newlines, the
    closing brace where the branch's was."""
    newlines = _text(node, data).count("\n")
    if not keep:
        return "\n" * newlines
    indent = " " * max(node.end_point[1] - 1, 0) if newlines else ""
    return keep[:1] + "\n" * newlines + indent + keep[1:]


def _instantiated_once(root: Node, data: bytes, kernel: Node, inst: Instantiation,
                       dropped: list[tuple[int, int, str]]):
    """(function template, its parameters -> arguments resolved) for each function template
    whose every call in the kernel's kept code (outside ``dropped``) names the same explicit
    template arguments, to any depth of calls; one called otherwise too (deduced arguments,
    other ones), and all it calls, is left whole."""
    templates: dict[str, Node | None] = {}
    for n in _walk(root):
        if n.type == "function_definition" and n.parent is not None and \
                n.parent.type == "template_declaration" and n.start_byte != kernel.start_byte:
            name = _fn_name(n, data)
            if name:  # an overloaded name is left alone (which one a call takes is unsure)
                templates[name] = None if name in templates else n
    seen: dict[str, dict[str, str] | None] = {}
    caller: dict[str, str] = {}  # the function whose call first bound each
    queue = [("", kernel, inst.scope, list(dropped))]
    while queue:
        here, fn, scope, skip = queue.pop(0)
        for call in _walk(fn.child_by_field_name("body") or fn):
            f = call.child_by_field_name("function") if call.type == "call_expression" else None
            if f is None or any(s <= call.start_byte < e for s, e, _ in skip):
                continue
            name = callee_name(f, data)
            target = templates.get(name)
            if target is None:
                continue
            args = f.child_by_field_name("arguments") if f.type == "template_function" else None
            spelled = split_template_args(_text(args, data)[1:-1]) if args is not None else []
            names = _parameter_names(target.parent, data)
            if len(spelled) != len(names):
                seen[name] = None  # deduced arguments: not followed
                continue
            bound = dict(zip(names, (inst.resolve(a, scope) for a in spelled), strict=True))
            if name not in seen:
                seen[name], caller[name] = bound, here
                queue.append((name, target, bound, []))
            elif seen[name] != bound:
                seen[name] = None
    for name in seen:  # callers first: what a template left whole calls is left whole too
        if seen[name] is not None and caller.get(name) and seen.get(caller[name]) is None:
            seen[name] = None
    for name, bound in seen.items():
        if bound is not None:
            yield templates[name], bound


def _parameter_names(outer: Node, data: bytes) -> list[str]:
    out = []
    for p in outer.child_by_field_name("parameters").named_children:
        ids = [x for x in p.named_children if x.type in ("type_identifier", "identifier")]
        out.append(_text(ids[-1], data) if ids else "")
    return out


def _value_text(text: str) -> Value | None:
    t = text.strip()
    if t in ("true", "false"):
        return t == "true"
    return int(t) if t.lstrip("-").isdigit() else None
