"""Which specialisations and overloads of a called function the kernel's instantiation can use.
DeepSpeed's `conversion::to` has dozens of full specialisations (`template <> double
to(float val)`); a kernel with T = float calls `to<float>(buf[j])` (buf a `T[]`), which only
`float to(float)` serves. The others are never instantiated in a real build: one spells a PTX
typo (`ctv.rn.f64.f32`), the double ones call `__ll2double_rn`, which Metal cannot have, so the
closure keeps only what some call in the kept code selects. A definition is dropped only when
every use of its name is a call whose template arguments kport knows (explicit, or deduced from
an argument whose type expr_types.py is sure of) and none selects it; else all are kept."""

from __future__ import annotations

import re

from tree_sitter import Node

from agent.translate.expr_types import (
    Scope,
    canonical,
    declared_types,
    expr_type,
    toolchain_returns,
)
from agent.translate.namespaces import enclosing
from agent.translate.tree import _fn_name, _text, _walk

_CLASSES = ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier")
Key = tuple[str, tuple[str, ...]]  # (return type, parameter types), canonical


def _inner(n: Node) -> Node:
    while n.type == "template_declaration" and n.named_children:
        n = n.named_children[-1]
    return n


def _template_params(n: Node, data: bytes) -> list[tuple[str, bool, str | None]] | None:
    """(name, is a type, default as spelled) of ``n``'s template parameters ([] for `template
    <>` and plain functions); None for a variadic parameter."""
    if n.type != "template_declaration":
        return []
    out = []
    for p in n.child_by_field_name("parameters").named_children:
        if p.type.startswith("variadic"):
            return None
        names = [c for c in p.named_children if c.type in ("type_identifier", "identifier")]
        ident = next((c for c in _walk(p) if c.type in ("type_identifier", "identifier")), None)
        default = p.child_by_field_name("default_type") or p.child_by_field_name("default_value")
        out.append((_text(names[0] if names else ident, data) if (names or ident) else "",
                    "type_parameter" in p.type, _text(default, data) if default else None))
    return out


def _signature(fn: Node, data: bytes) -> tuple[str, list[str]]:
    """(return type, parameter types) of function definition ``fn`` as spelled, a `*` per
    pointer or array level."""
    decl, stars = fn.child_by_field_name("declarator"), 0
    while decl is not None and decl.type != "function_declarator":
        stars += decl.type == "pointer_declarator"
        decl = decl.child_by_field_name("declarator")
    ret = fn.child_by_field_name("type")
    params = []
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    for p in plist.named_children if plist is not None else ():
        if p.type in ("parameter_declaration", "optional_parameter_declaration"):
            levels = sum(d.type in ("pointer_declarator", "abstract_pointer_declarator",
                                    "array_declarator", "abstract_array_declarator")
                         for d in _walk(p))
            params.append(_text(p.child_by_field_name("type"), data) + "*" * levels)
    return (_text(ret, data) if ret is not None else "") + "*" * stars, params


class Selection:
    """The function definitions among a closure's items that no call in the kept code
    selects (``unused``)."""

    def __init__(self, items: list[Node], data: bytes, kernel: Node,
                 bindings: dict[str, str]) -> None:
        self.data, self.kernel = data, _inner(kernel)
        self.groups: dict[str, list[Node]] = {}
        for n in items:
            inner = _inner(n)
            if inner.type == "function_definition" and (name := _fn_name(inner, data)):
                self.groups.setdefault(name, []).append(n)
        self.groups = {k: v for k, v in self.groups.items() if len(v) > 1}
        root = kernel
        while root.parent is not None:
            root = root.parent
        self.aliases: dict[str, set[str]] = {}
        self.classes: set[str] = set()
        for n in _walk(root):
            if n.type == "alias_declaration" and n.child_by_field_name("name") is not None:
                self.aliases.setdefault(_text(n.child_by_field_name("name"), data), set()).add(
                    _text(n.child_by_field_name("type"), data))
            elif n.type == "type_definition" and n.child_by_field_name("type") is not None:
                for d in n.children_by_field_name("declarator"):
                    self.aliases.setdefault(_text(d, data), set()).add(
                        _text(n.child_by_field_name("type"), data))
            elif n.type in _CLASSES and n.child_by_field_name("name") is not None:
                self.classes.add(_text(n.child_by_field_name("name"), data))
        self.kernel_bindings = {name: canonical(value, self._scope({}, set()))
                                for name, value in bindings.items()}
        self.returns = dict(toolchain_returns())
        for name, fns in self._functions(root).items():  # the source's own, non-template
            types = {canonical(_signature(f, data)[0], self._scope({}, set())) if
                     f.parent.type != "template_declaration" else None for f in fns}
            self.returns[name] = types.pop() if len(types) == 1 else None

    def _functions(self, root: Node) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for n in _walk(root):
            if n.type == "function_definition" and (name := _fn_name(n, self.data)):
                out.setdefault(name, []).append(n)
        return out

    def _scope(self, bindings: dict, dependent: set[str], fn: Node | None = None) -> Scope:
        return Scope(self.data, bindings, dependent, self.aliases, self.classes,
                     declared_types(fn, self.data) if fn is not None else {}, self._call_type)

    def unused(self, kept: list[Node]) -> set[int]:
        """Start bytes of the definitions of a called name that no call in the kernel and
        ``kept`` can select."""
        code = [self.kernel, *kept]
        out: set[int] = set()
        for name, defs in self.groups.items():
            selected = self._selected(name, defs, code)
            if selected is not None:
                out |= {d.start_byte for d in defs} - selected
        return out

    def _selected(self, name: str, defs: list[Node], code: list[Node]) -> set[int] | None:
        """Start bytes of the definitions in ``defs`` some call in ``code`` selects (with
        every primary template and every definition kport cannot compare); None: all."""
        data = self.data
        if len({tuple(n.start_byte for n in enclosing(d)) for d in defs}) != 1:
            return None  # one name in several namespaces: lookup decides, not kport
        shapes = [(d, _template_params(d, data)) for d in defs]
        if any(p is None for _, p in shapes):
            return None
        primaries = [(d, p) for d, p in shapes if p]
        if len(primaries) > 1 or any(not t for d, p in primaries for _, t, _ in p):
            return None  # overloaded templates, non-type parameters: not decided here
        if any(f.type == "qualified_identifier" for d in defs
               for f in _walk(_inner(d).child_by_field_name("declarator"))):
            return None  # `template <> float ns::f(...)`: defined out of its namespace
        keep = {d.start_byte for d, p in primaries}
        keys: dict[int, Key] = {}
        for d, _ in shapes:
            if _inner(d).child_by_field_name("body") is None:
                keep.add(d.start_byte)
                continue
            ret, params = _signature(_inner(d), data)
            scope = self._scope({}, set())
            key = (canonical(ret, scope), tuple(canonical(p, scope) for p in params))
            if key[0] is None or None in key[1]:
                keep.add(d.start_byte)  # a type kport cannot compare: kept
            elif d.start_byte not in keep:
                keys[d.start_byte] = key
        primary = primaries[0] if primaries else None
        inside = {(primary[0].start_byte, primary[0].end_byte)} if primary else set()
        calls, deferred = [], []
        for node in code:
            for ident in _walk(node):
                if ident.type == "preproc_arg" and \
                        name in re.findall(r"[A-Za-z_]\w*", _text(ident, data)):
                    return None  # in a macro's body: its arguments' types are unknown
                if ident.type != "identifier" or _text(ident, data) != name:
                    continue
                call = _call_of(ident)
                if call is None and not _declares(ident):
                    return None  # named, not called (a function pointer, a template argument)
                if call is None:
                    continue
                fn = _enclosing_function(call)
                if fn is not None and any(b <= fn.start_byte < e for b, e in inside):
                    deferred.append((call, fn))
                else:
                    calls.append((call, fn))
        instantiated: list[dict[str, str]] = []
        work = [(call, self._context(fn)) for call, fn in calls]
        while work:
            call, scope = work.pop()
            if scope is None:
                return None
            chosen = self._choose(call, scope, primary, keys)
            if chosen is None:
                return None
            hits, bound = chosen
            keep |= hits
            if bound is not None and not hits & set(keys) and bound not in instantiated:
                instantiated.append(bound)  # the primary itself is instantiated: its calls count
                work += [(c, self._scope(bound, set(), fn)) for c, fn in deferred]
        return keep

    def _context(self, fn: Node | None) -> Scope | None:
        """The scope of a call in ``fn``: the kernel's template arguments in the kernel; a
        template's parameters unknown elsewhere."""
        if fn is None:
            return None
        dependent = set()
        for t in (a for a in _ancestors(fn) if a.type == "template_declaration"):
            dependent |= {n for n, _, _ in _template_params(t, self.data) or ()}
        bindings = self.kernel_bindings if fn.start_byte == self.kernel.start_byte else {}
        return self._scope(bindings, dependent, fn)

    def _choose(self, call: Node, scope: Scope, primary, keys: dict[int, Key]):
        """(the definitions ``call`` may select, the primary's template arguments it
        instantiates or None); None when kport cannot tell."""
        data = self.data
        f = call.child_by_field_name("function")
        while f.type == "qualified_identifier":
            f = f.child_by_field_name("name")
        explicit = []
        if f.type == "template_function":
            targs = f.child_by_field_name("arguments")
            explicit = [canonical(_text(a, data), scope) for a in targs.named_children]
            if None in explicit:
                return None
        args = [expr_type(a, scope) for a in call.child_by_field_name("arguments").named_children]
        if None in args:
            return None
        exact = {b for b, (_, params) in keys.items() if params == tuple(args)}
        if primary is None:  # plain overloads: an exact match, else kport cannot tell
            return (exact, None) if exact and not explicit else None
        pdef, pparams = primary
        ret, params = _signature(_inner(pdef), data)
        bound: dict[str, str] = dict(zip([n for n, _, _ in pparams], explicit, strict=False))
        for spelled, arg in zip(params, args, strict=False):  # deduce `FROM val`, `const T* p`
            words = [w for w in spelled.replace("*", " ").replace("&", " ").split()
                     if w not in ("const", "volatile")]
            stars = spelled.count("*")
            if len(words) == 1 and words[0] in dict.fromkeys(n for n, _, _ in pparams) and \
                    words[0] not in bound:
                if stars and not arg.endswith("*" * stars):
                    return None
                bound[words[0]] = arg[:len(arg) - stars] if stars else arg
        for n, _, default in pparams:
            if n not in bound and default is not None:
                value = canonical(default, self._scope(dict(bound), set()))
                if value is not None:
                    bound[n] = value
        if len(bound) < len(pparams):
            return None
        inst = self._scope(bound, set())
        key = (canonical(ret, inst), tuple(canonical(p, inst) for p in params))
        if key[0] is None or None in key[1]:
            return None
        hits = {b for b, k in keys.items() if k == key}
        return hits | (exact if not explicit else set()), bound

    def _call_type(self, call: Node) -> str | None:
        """What a call returns: a function the source defines once (not a template), or one
        kport's CUDA headers declare."""
        f = call.child_by_field_name("function")
        while f is not None and f.type == "qualified_identifier":
            f = f.child_by_field_name("name")
        return self.returns.get(_text(f, self.data)) if f is not None and \
            f.type == "identifier" else None


def _ancestors(n: Node):
    while n is not None:
        yield n
        n = n.parent


def _call_of(ident: Node) -> Node | None:
    """The call whose function ``ident`` names (`f(x)`, `ns::f<T>(x)`); None otherwise."""
    n = ident
    while n.parent is not None and n.parent.type in ("qualified_identifier",
                                                     "template_function") and \
            n.parent.child_by_field_name("name") == n:
        n = n.parent
    parent = n.parent
    if parent is not None and parent.type == "call_expression" and \
            parent.child_by_field_name("function") == n:
        return parent
    return None


def _declares(ident: Node) -> bool:
    """Is ``ident`` the name in a function's own declarator."""
    return any(a.type == "function_declarator" for a in _ancestors(ident.parent)) and not any(
        a.type in ("parameter_list", "template_argument_list") for a in _ancestors(ident.parent))


def _enclosing_function(n: Node) -> Node | None:
    return next((a for a in _ancestors(n) if a.type == "function_definition"), None)
