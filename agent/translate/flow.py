"""What a device function does with the memory its pointer parameters point at, so that a
kernel handing a buffer to it is known to read or write that buffer: vLLM's rotary kernel
writes ``query`` only inside ``apply_token_rotary_embedding(scalar_t* arr, ...)``, reached as
``query + token_head`` through another helper; DeepSpeed's ``store_global(void* dst, ...)``
writes through ``reinterpret_cast<uint4*>(dst)[0]``. Summaries are per function name (every
overload and specialisation together) and follow calls down to any depth."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from agent.translate.cub import data_effects as cub_data_effects
from agent.translate.tree import _device_code, _fn_name, _text, _walk
from kb.rewrites import load_rewrites

_PARAMETERS = ("parameter_declaration", "optional_parameter_declaration")
# an argument that is a value, not a pointer (`f(x[i])`, `f(*p)`, `f(v.x)`)
_VALUES = ("subscript_expression", "field_expression")


@dataclass(frozen=True)
class Effect:
    """What a function does through one pointer parameter: reads, writes, and whether it
    reads before it first writes (the caller's data is then needed: in-place)."""

    reads: bool = False
    writes: bool = False
    read_first: bool = False

    def __or__(self, other: Effect) -> Effect:
        return Effect(self.reads or other.reads, self.writes or other.writes,
                      self.read_first or other.read_first)


def root_name(node: Node | None, data: bytes) -> str | None:
    """analyze.root_name: the variable an lvalue or pointer expression is rooted at."""
    # lazy: analyze imports this module
    from agent.translate.analyze import root_name as rooted

    return rooted(node, data)


def callee_name(fn: Node, data: bytes) -> str:
    """The function a call names, scopes and template arguments dropped: ``f`` for ``f(..)``,
    ``ns::f<N>(..)``, ``f<T, U>(..)``."""
    while fn.type in ("qualified_identifier", "template_function"):
        name = fn.child_by_field_name("name")
        if name is None:
            break
        fn = name
    return _text(fn, data).split("::")[-1]


def _pointer_params(fn: Node, data: bytes) -> list[tuple[str, bool] | None]:
    """Each parameter of ``fn``: (name, const) for a pointer, None for anything else."""
    decl = next((n for n in _walk(fn) if n.type == "function_declarator"), None)
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    out: list[tuple[str, bool] | None] = []
    for p in plist.named_children if plist is not None else []:
        if p.type not in _PARAMETERS:
            continue
        ids = [n for n in _walk(p.child_by_field_name("declarator") or p)
               if n.type == "identifier"]
        pointer = any(n.type == "pointer_declarator" for n in _walk(p))
        const = any(c.type == "type_qualifier" and _text(c, data) == "const" for c in p.children)
        out.append((_text(ids[-1], data), const) if pointer and ids else None)
    return out


def _stored(n: Node, data: bytes) -> bool:
    """Whether the access ``n`` is the target of a plain ``=`` (``p[i] = v``, ``p[0].x = v``)."""
    while n.parent is not None and n.parent.type == "field_expression" and \
            n.parent.child_by_field_name("argument") == n:
        n = n.parent
    p = n.parent
    return p is not None and p.type == "assignment_expression" and \
        p.child_by_field_name("left") == n and \
        _text(p.child_by_field_name("operator"), data) == "="


def accesses(body: Node, data: bytes, names: dict[str, bool],
             summaries: dict[str, dict[int, Effect]]) -> dict[str, Effect]:
    """For each pointer of ``names`` (name -> const): what ``body`` does through it, through
    the local pointers it initialises (``uint4* d = reinterpret_cast<uint4*>(p)``,
    ``float* row = p + k``) and through the calls it is handed to: a function of
    ``summaries`` by its summary; an atomic or a CUDA call the rewrite table maps as a read;
    another function kport cannot see into as a read and, unless const, a write."""
    owner = {n: n for n in names}
    for n in _walk(body):  # views, in source order (a view of a view too; `auto p = x + k`)
        if n.type == "init_declarator" and \
                (d := n.child_by_field_name("declarator")) is not None and \
                (d.type == "pointer_declarator" or d.type == "identifier" and _auto(n, data)) \
                and (r := root_name(n.child_by_field_name("value"), data)) in owner:
            ids = [x for x in _walk(d) if x.type == "identifier"]
            if ids:
                owner[_text(ids[0], data)] = owner[r]
    table = load_rewrites()
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}

    def read(name: str, at: int) -> None:
        reads[owner[name]] = min(reads.get(owner[name], at), at)

    def write(name: str, at: int) -> None:
        writes[owner[name]] = min(writes.get(owner[name], at), at)

    for n in _walk(body):
        if n.type in ("assignment_expression", "update_expression"):
            t = n.child_by_field_name("left") or n.child_by_field_name("argument")
            r = root_name(t, data) if t is not None else None
            if r not in owner or t.type == "identifier":  # `p += k` moves the pointer
                continue
            write(r, n.end_byte)
            op = n.child_by_field_name("operator")
            if n.type == "update_expression" or (op is not None and _text(op, data) != "="):
                read(r, n.start_byte)
        elif n.type == "subscript_expression" or (n.type == "pointer_expression" and
                                                  _text(n, data).startswith("*")) or (
                n.type == "field_expression" and "->" in _text(n, data)):
            r = root_name(n, data)
            p = n.parent
            addressed = p is not None and p.type == "pointer_expression" and \
                _text(p, data).startswith("&")
            if r in owner and not _stored(n, data) and not addressed:
                read(r, n.start_byte)
        elif n.type == "call_expression" and (f := n.child_by_field_name("function")):
            name = callee_name(f, data)
            args = n.child_by_field_name("arguments")
            if name.endswith("_cast") or args is None:
                continue  # a cast views its operand: the access through it counts
            for i, a in enumerate(x for x in args.named_children if x.type != "comment"):
                r = root_name(a, data)
                if r not in owner or a.type in _VALUES or _text(a, data).startswith("*"):
                    continue
                if name in summaries:
                    e = summaries[name].get(i, Effect())
                elif name in table.atomics and i == 0:
                    e = Effect(True, True, True)
                elif name in table.call_names():
                    e = Effect(True, False, True)
                else:  # a call kport cannot see into: it may read, and write what is mutable
                    e = Effect(True, not names.get(owner[r], False), True)
                if e.reads:
                    read(r, n.start_byte if e.read_first else n.end_byte)
                if e.writes:
                    write(r, n.end_byte)
    # CUB's Load and Store, found on the text (cub.py): `BlockStoreT(s).Store(out, ...)` parses
    # as a broken declaration, whose arguments no walk of the tree sees (mamba's store_output)
    for r, end, stores in cub_data_effects(data[body.start_byte:body.end_byte].decode("latin-1"),
                                           data.decode("latin-1")):
        if r in owner:
            (write if stores else read)(r, body.start_byte + end)
    return {p: Effect(p in reads, p in writes,
                      p in reads and reads[p] < writes.get(p, body.end_byte + 1))
            for p in names}


def _auto(init: Node, data: bytes) -> bool:
    """Whether the declaration of ``init`` (an init declarator) has type ``auto``."""
    ty = init.parent.child_by_field_name("type") if init.parent is not None else None
    return ty is not None and _text(ty, data).strip() == "auto"


def param_effects(root: Node, data: bytes, names: set[str]) -> dict[str, dict[int, Effect]]:
    """name -> {parameter index: Effect} for each device function of ``names`` (all its
    definitions under ``root`` together), following the calls between them to any depth."""
    defs = [(n, name) for n in _walk(root) if n.type == "function_definition"
            and (name := _fn_name(n, data)) in names and _device_code(n, data)
            and n.child_by_field_name("body") is not None]
    summaries: dict[str, dict[int, Effect]] = {n: {} for n in names}  # nothing, at first
    for _ in range(len(names) + 1):  # until nothing changes: a call chain is at most this long
        now: dict[str, dict[int, Effect]] = {n: {} for n in names}
        for fn, name in defs:
            params = _pointer_params(fn, data)
            got = accesses(fn.child_by_field_name("body"), data,
                           {p[0]: p[1] for p in params if p is not None}, summaries)
            mine = now.setdefault(name, {})
            for i, p in enumerate(params):
                if p is not None:
                    mine[i] = mine.get(i, Effect()) | got[p[0]]
        if now == summaries:
            break
        summaries = now
    return summaries


def call_effects(call: Node, data: bytes, effects: dict[str, dict[int, Effect]],
                 references: dict[str, set[int]]):
    """(the buffer an argument of ``call`` is rooted at, what the callee does through it) for
    each argument handed to a function of ``effects`` as a pointer, or to one of its
    ``references`` parameters (a non-const reference: read and written)."""
    f, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    if f is None or args is None:
        return
    name = callee_name(f, data)
    mine = effects.get(name, {})
    for i, a in enumerate(x for x in args.named_children if x.type != "comment"):
        r = root_name(a, data)
        if r is None:
            continue
        if i in mine and a.type not in _VALUES and not _text(a, data).startswith("*"):
            e = mine[i]
        elif i not in mine and i in references.get(name, ()):
            e = Effect(True, True, True)
        else:
            continue
        if e.reads or e.writes:
            yield r, e


def nested_splits(split: dict[str, set[int]], funcs: dict[str, tuple[Node, Node]], data: bytes,
                  writes: dict[str, set[int]]) -> dict[str, set[int]]:
    """``split`` (function -> indexes of in-place pointer parameters, which the port passes
    as a read and a write pointer) with every function such a parameter is handed on to and
    written by added, to any depth: vLLM's ``apply_rotary_embedding(query, ...)`` hands
    ``query + token_head`` to ``apply_token_rotary_embedding``, which writes it."""
    out = {f: set(ix) for f, ix in split.items()}
    todo = [(f, i) for f, ix in out.items() for i in ix]
    while todo:
        f, i = todo.pop()
        if f not in funcs:
            continue
        fn = funcs[f][0]
        params = _pointer_params(fn, data)
        if i >= len(params) or params[i] is None:
            continue
        views = {params[i][0]}
        for n in _walk(fn):
            if n.type == "init_declarator" and \
                    (d := n.child_by_field_name("declarator")) is not None and \
                    d.type == "pointer_declarator" and \
                    root_name(n.child_by_field_name("value"), data) in views:
                views |= {_text(x, data) for x in _walk(d) if x.type == "identifier"}
            if n.type != "call_expression" or (g := n.child_by_field_name("function")) is None:
                continue
            callee, args = callee_name(g, data), n.child_by_field_name("arguments")
            for j, a in enumerate(x for x in (args.named_children if args else [])
                                  if x.type != "comment"):
                if j in writes.get(callee, ()) and root_name(a, data) in views and \
                        j not in out.setdefault(callee, set()):
                    out[callee].add(j)
                    todo.append((callee, j))
    return {f: ix for f, ix in out.items() if ix}


def thread_params(bodies: list[Node], funcs: dict[str, tuple[Node, Node]],
                  data: bytes) -> dict[str, set[int]]:
    """function -> indexes of its pointer parameters that every call in ``bodies`` (the
    kernel's and its callees') hands a thread-local array (``T buf[N]``, not ``__shared__``)
    or a local's address: DeepSpeed's ``load_global(temp_buf, a + i)`` reads into registers.
    Such a parameter is a ``thread`` pointer in Metal; one handed device memory elsewhere too
    is left out (it stays ``device``, and the other call does not compile)."""
    local, other = {}, {}
    for body in bodies:
        arrays = {_text(ids[0], data) for n in _walk(body) if n.type == "array_declarator"
                  and "__shared__" not in _text(n.parent, data)
                  and (ids := [x for x in _walk(n) if x.type == "identifier"])}
        for n in _walk(body):
            f = n.child_by_field_name("function") if n.type == "call_expression" else None
            if f is None or (name := callee_name(f, data)) not in funcs:
                continue
            args = n.child_by_field_name("arguments")
            for i, a in enumerate(x for x in (args.named_children if args else [])
                                  if x.type != "comment"):
                if a.type in _VALUES or _text(a, data).startswith("*"):
                    continue
                taken = a.type == "pointer_expression" and _text(a, data).startswith("&")
                if root_name(a, data) in arrays or taken and a.named_children and \
                        a.named_children[-1].type == "identifier":
                    local.setdefault(name, set()).add(i)
                else:
                    other.setdefault(name, set()).add(i)
    return {f: ix - other.get(f, set()) for f, ix in local.items() if ix - other.get(f, set())}
