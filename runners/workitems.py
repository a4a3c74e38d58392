"""Work-item loops: a kernel's barrier-free regions run as loops over its threadgroup's threads.

PoCL's technique, on the tree-sitter tree of the simulator's rewritten source (never regex). A
kernel qualifies when every barrier is a statement of its body's top-level list, or of the
top-level list of a `for` or `if` whose header is uniform across the group (kernel parameters,
group ids and sizes, template parameters, literals, uniform locals and counters of uniform
loops). Its body then runs once per group: each run of statements between barriers becomes
``for (each thread) { ... }``, a barrier a runtime call, and a local still read after the end
of its region a per-thread array. ``return`` marks the thread as exited: it skips later
regions and is counted at later barriers, as a fiber that returned is. Everything else keeps
fibers; ``form_regions`` says why in one line. Line numbers never change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

from runners.sourcetree import parse
from runners.sourcetree import walk as _walk

MODE_FIBERS, MODE_LOOP, MODE_REGIONS = "fibers", "thread loop", "work-item loops"
_PURE_CALLS = frozenset({"min", "max", "umin", "umax", "metal::min", "metal::max"})
_LOOPS = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})
_REFUSED = frozenset({"goto_statement", "labeled_statement", "lambda_expression",
                      "gnu_asm_expression", "asm_statement", "co_await_expression",
                      "try_statement", "class_specifier", "struct_specifier", "union_specifier"})
_ASSIGN = frozenset({"assignment_expression", "update_expression"})


class NotFormed(Exception):
    """The kernel keeps fibers; the message says why."""


def _text(n: Node) -> str:
    return n.text.decode()


def _idents(n: Node) -> set[str]:
    return {_text(x) for x in _walk(n) if x.type == "identifier"}


def _declared_name(d: Node) -> str:
    """The identifier a declarator declares; NotFormed for references and functions."""
    while d.type not in ("identifier", "field_identifier"):
        if d.type in ("reference_declarator", "function_declarator"):
            raise NotFormed(f"line {d.start_point[0] + 1}: a reference or function declared "
                            "in the kernel body")
        inner = d.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in d.named_children if c.type.endswith("declarator")
                          or c.type == "identifier"), None)
        if inner is None:
            raise NotFormed(f"line {d.start_point[0] + 1}: a declarator kport cannot read")
        d = inner
    return _text(d)


@dataclass
class _Var:
    index: int
    name: str
    typedef: str
    array: bool = False  # may change through a pointer it decays to: always copied back
    remat: str = ""  # its declaration, repeated in each later region instead of an array


@dataclass
class _Plan:
    src: bytes
    barrier: str
    varying: dict[str, str]
    edits: list[tuple[int, int, str]] = field(default_factory=list)
    hoisted: list[_Var] = field(default_factory=list)
    regions: int = 0
    barriers: int = 0
    modified: set[str] = field(default_factory=set)
    pointers: list[tuple[str, Node]] = field(default_factory=list)  # live pointer locals
    root: Node | None = None
    per_thread: set[str] = field(default_factory=set)  # built-ins of the thread's position
    declared: dict[str, int] = field(default_factory=dict)  # declarations of each name
    exits: bool = False  # the body holds a `return`: threads may leave before the end

    def edit(self, start: int, end: int, text: str) -> None:
        self.edits.append((start, end, text))


def _modified_names(body: Node) -> set[str]:
    """Names assigned, incremented or whose address is taken anywhere in ``body``."""
    out = set()
    for n in _walk(body):
        target = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        elif n.type == "pointer_expression" and _text(n.children[0]) == "&":
            target = n.child_by_field_name("argument")
        while target is not None and target.type in ("subscript_expression", "field_expression",
                                                     "parenthesized_expression"):
            target = (target.child_by_field_name("argument") or
                      (target.named_children[0] if target.named_children else None))
        if target is not None and target.type == "identifier":
            out.add(_text(target))
    return out


# Maths functions that write through a reference argument (Metal's modf/frexp, swap).
_REF_OUT = frozenset({"modf", "frexp", "swap", "sincos", "remquo", "metal::modf",
                      "metal::frexp", "metal::swap"})


def _rebound(root: Node, body: Node) -> set[str]:
    """Names ``body`` gives a new value (not what they point at): assigned, incremented,
    address taken, passed to a function of ``root`` that takes a non-const reference or to
    one of _REF_OUT, or whose member function is called."""
    ref_funcs = set(_REF_OUT)
    for fn in _walk(root):
        if fn.type == "function_definition":
            d = fn.child_by_field_name("declarator")
            params = d.child_by_field_name("parameters") if d is not None else None
            if params is not None and any(
                    any(x.type == "reference_declarator" for x in _walk(p))
                    and not any(_text(x) == "const" for x in p.children) for p in
                    params.named_children):
                ref_funcs.add(_function_name(fn))
    out = set()

    def root_name(n: Node | None) -> str | None:
        while n is not None and (n.type == "parenthesized_expression" or (
                n.type == "field_expression" and _text(n.child_by_field_name("operator")) == ".")):
            n = n.child_by_field_name("argument") or n.named_children[0]
        return _text(n) if n is not None and n.type == "identifier" else None

    for n in _walk(body):
        targets = []
        if n.type == "assignment_expression":
            targets.append(n.child_by_field_name("left"))
        elif n.type == "update_expression":
            targets.append(n.child_by_field_name("argument"))
        elif n.type == "pointer_expression" and _text(n.children[0]) == "&":
            targets.append(n.child_by_field_name("argument"))
        elif n.type == "call_expression":
            fn = n.child_by_field_name("function")
            if fn.type == "field_expression":
                targets.append(fn.child_by_field_name("argument"))
            elif _text(fn) in ref_funcs:
                targets += n.child_by_field_name("arguments").named_children
        out |= {name for t in targets if (name := root_name(t))}
    return out


def _uniform(n: Node, plan: _Plan, names: set[str]) -> bool:
    """Whether expression ``n`` has one value for every thread of a group."""
    t = n.type
    if t in ("number_literal", "true", "false", "char_literal", "null", "nullptr",
             "sizeof_expression", "alignof_expression", "comment"):
        return True
    if t == "identifier":
        return _text(n) in names
    if t == "field_expression":
        return _uniform(n.child_by_field_name("argument"), plan, names)
    if t == "cast_expression":
        return _uniform(n.child_by_field_name("value"), plan, names)
    if t == "call_expression":
        fn = n.child_by_field_name("function")
        args = n.child_by_field_name("arguments")
        return (_text(fn) in _PURE_CALLS
                and all(_uniform(a, plan, names) for a in args.named_children))
    if t == "pointer_expression" and _text(n.children[0]) == "*":
        return False  # a read of memory
    if t in ("binary_expression", "unary_expression", "parenthesized_expression",
             "conditional_expression", "comma_expression", "pointer_expression"):
        return all(_uniform(c, plan, names) for c in n.named_children)
    return False


def _is_barrier(stmt: Node, barrier: str) -> bool:
    if stmt.type != "expression_statement" or not stmt.named_children:
        return False
    call = stmt.named_children[0]
    return (call.type == "call_expression"
            and _text(call.child_by_field_name("function")) == barrier)


def _has_barrier(n: Node, barrier: str) -> bool:
    return any(x.type == "identifier" and _text(x) == barrier for x in _walk(n))


def _escapes(stmt: Node) -> Node | None:
    """A break/continue in ``stmt`` that leaves it (aimed at a loop around it), or None."""
    def visit(n: Node, in_loop: bool, in_switch: bool) -> Node | None:
        if n.type == "break_statement" and not (in_loop or in_switch):
            return n
        if n.type == "continue_statement" and not in_loop:
            return n
        for c in n.children:
            found = visit(c, in_loop or n.type in _LOOPS,
                          in_switch or n.type == "switch_statement")
            if found is not None:
                return found
        return None
    return visit(stmt, False, False)


def _statements(n: Node) -> list[Node]:
    if n.type == "compound_statement":
        return [c for c in n.named_children if c.type != "comment"]
    return [n]


def _group_level(stmt: Node, plan: _Plan, names: set[str]) -> set[str] | None:
    """Names a statement that runs once per group declares (kport's threadgroup storage,
    typedefs, uniform locals never modified), or None when it runs per thread."""
    text = _text(stmt)
    if stmt.type in ("alias_declaration", "type_definition"):
        return set()
    if stmt.type != "declaration":
        return None
    if "__kp_tg_alloc" in text or "__kp_dyn_smem" in text or "__kp_site_" in text:
        return set()  # threadgroup storage (srcrewrite.rewrite_group_storage): one per group
    declared = set()
    for d in stmt.children_by_field_name("declarator"):
        if d.type != "init_declarator" or d.child_by_field_name("declarator").type != "identifier":
            return None
        value = d.child_by_field_name("value")
        name = _declared_name(d)
        if name in plan.modified or not _uniform(value, plan, names | declared):
            return None
        declared.add(name)
    return declared


def _hoist_decl(stmt: Node, plan: _Plan, used_later: set[str],
                known: set[str]) -> list[tuple[str, _Var]]:
    """Per-thread arrays for the names of declaration ``stmt`` read after its region; the
    statement becomes assignments to them. Returns (name, var) for each array. A declaration
    that only computes from the thread's position and uniform names is repeated instead."""
    decls = stmt.children_by_field_name("declarator")
    for c in stmt.children:
        if c.type == "storage_class_specifier":
            raise NotFormed(f"line {stmt.start_point[0] + 1}: a `{_text(c)}` local in the "
                            "kernel body")
    try:
        declared = [_declared_name(d) for d in decls]
    except NotFormed:  # a reference: fine while it dies with its region
        if any(_idents(d.child_by_field_name("declarator") or d) & used_later for d in decls):
            raise
        return []
    if not any(n in used_later for n in declared):
        return []
    spec_parts = [_text(c) for c in stmt.children
                  if c.end_byte <= decls[0].start_byte and c.type != "comment"]
    spec = " ".join(spec_parts)
    remat = _remat(stmt, decls, spec, plan, known)
    if remat is not None:
        return remat
    if "auto" in spec.split() or "decltype" in spec:
        raise NotFormed(f"line {stmt.start_point[0] + 1}: an `auto` local lives across a "
                        "barrier")
    out, code = [], []
    for d, name in zip(decls, declared, strict=True):
        var = _Var(len(plan.hoisted), name, "")
        inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        tname = f"__kp_wiT{var.index}"
        ident = next(x for x in _walk(inner) if x.type == "identifier" and _text(x) == name)
        declarator = (plan.src[inner.start_byte:ident.start_byte].decode() + tname
                      + plan.src[ident.end_byte:inner.end_byte].decode())
        # a const scalar is assigned once a thread: its array holds non-const elements
        own = " ".join(p for p in spec_parts if p != "const") if inner.type == "identifier" \
            else spec
        var.typedef = f"typedef {own} {declarator};"
        var.array = inner.type != "identifier"
        if any(x.type == "pointer_declarator" for x in _walk(inner)):
            plan.pointers.append((name, stmt))
        plan.hoisted.append(var)
        out.append((name, var))
        if d.type != "init_declarator":
            continue
        value = d.child_by_field_name("value")
        vtext = _text(value)
        if inner.type == "array_declarator":
            code.append(f"{{ {tname} __kp_wi_init = {vtext}; __builtin_memcpy((void*)&{name}, "
                        f"(const void*)&__kp_wi_init, sizeof({tname})); }}")
        elif value.type == "initializer_list":
            code.append(f"{name} = {tname}{vtext};")
        elif value.type == "argument_list":
            code.append(f"{name} = {tname}{vtext};")
        else:
            code.append(f"{name} = {vtext};")
    plan.edit(stmt.start_byte, stmt.end_byte, " ".join(code) or ";")
    return out


def _remat(stmt: Node, decls: list[Node], spec: str, plan: _Plan,
           known: set[str]) -> list[tuple[str, _Var]] | None:
    """(name, var) for each local of ``stmt`` when every one is declared once, never changed,
    from the thread's position and names with one value all along (uniform names, other
    such locals, each declared once): later regions then declare it again, in registers,
    rather than keep it in an array. None otherwise."""
    out = []
    for d in decls:
        value = d.child_by_field_name("value") if d.type == "init_declarator" else None
        inner = d.child_by_field_name("declarator")
        if value is None or inner.type != "identifier":
            return None
        name = _text(inner)
        earlier = {n for n, _ in out}  # `int t = threadIdx.x, i = base + t;`
        if (name in plan.modified or not _uniform(value, plan, known | earlier | plan.per_thread)
                or any(plan.declared.get(x, 0) > 1 for x in _idents(value) | {name})):
            return None
        out.append((name, _Var(-1, name, "", remat=f"{spec} {name} = {_text(value)}; "
                               f"(void){name};")))
    return out


def _returns(stmt: Node, plan: _Plan, label: str) -> None:
    for n in _walk(stmt):
        if n.type == "return_statement":
            if n.named_children:
                raise NotFormed(f"line {n.start_point[0] + 1}: `return` with a value")
            plan.edit(n.start_byte, n.end_byte,
                      f"{{ __kp_wx[__kp_i] = 1; __kp_wd++; goto {label}; }}")


def _block(stmts: list[Node], plan: _Plan, names: set[str], scope: list[tuple[str, _Var]],
           in_loop: bool) -> None:
    """Plan one statement list that holds barriers: regions, barriers and nested blocks."""
    names = set(names)
    scope = list(scope)
    kinds = []
    for s in stmts:
        if _is_barrier(s, plan.barrier):
            kinds.append("barrier")
        elif _has_barrier(s, plan.barrier):
            kinds.append("nested")
        else:
            declared = _group_level(s, plan, names)
            if declared is not None:
                names |= declared
                kinds.append("group")
            else:
                kinds.append("region")
    names = set(names) - {n for s, k in zip(stmts, kinds, strict=True) if k == "region"
                          for n in _declares(s)}
    i = 0
    while i < len(stmts):
        s, kind = stmts[i], kinds[i]
        if kind == "barrier":
            call = s.named_children[0]
            plan.barriers += 1
            # The call stays, unevaluated, so the compiler still checks its arguments
            # (`threadgroup_barrier(mem_threadgroup)` must fail as it does under fibers).
            plan.edit(s.start_byte, s.end_byte, "__kp_wi_sync(__kp_g, __kp_wx, __kp_n, __kp_wd, "
                      f"__LINE__, {call.start_point[1] + 1}); "
                      f"(void)sizeof(({' '.join(_text(call).split())}, 0));"
                      + "\n" * _text(s).count("\n"))  # lines stay in place
            i += 1
        elif kind == "group":
            i += 1
        elif kind == "nested":
            _nested(s, plan, names, scope, in_loop)
            i += 1
        else:
            j = i
            while j < len(stmts) and kinds[j] == "region":
                j += 1
            run = stmts[i:j]
            later = set().union(*(_idents(x) for x in stmts[j:])) if j < len(stmts) else set()
            label = f"__kp_wiE{plan.regions}"
            plan.regions += 1
            own = []
            for r in run:
                if any(x.type in _REFUSED for x in _walk(r)):
                    raise NotFormed(f"line {r.start_point[0] + 1}: goto, a label, a lambda, "
                                    "asm or a local class in the kernel body")
                if in_loop and _escapes(r) is not None:
                    raise NotFormed(f"line {_escapes(r).start_point[0] + 1}: break or continue "
                                    "in a loop that holds a barrier")
                if r.type == "declaration":
                    known = names | {n for n, v in scope + own if v.remat}
                    own += _hoist_decl(r, plan, later, known)
                _returns(r, plan, label)
            bound = scope + own
            seen = [n for n, _ in bound]
            if len(set(seen)) != len(seen):
                raise NotFormed("two locals of one name live across barriers")
            # Each live local is a plain local of the region (registers, and no check hooks
            # on its accesses), copied in from its array and back out when it may change;
            # one computed from the thread's position is declared again instead.
            written = set().union(*(_modified_names(r) for r in run))
            used = set().union(*(_idents(r) for r in run))
            remat = " ".join(v.remat for _, v in scope if v.remat)
            bound = [(n, v) for n, v in bound if n in used and not v.remat]  # others wait
            mine = {n for n, _ in own}
            copy_in = " ".join(
                f"__kp_wiT{v.index} {n}; " + ("" if n in mine else _copy(f"&{n}", v, "in"))
                for n, v in bound)
            copy_out = " ".join(_copy(f"&{n}", v, "out") for n, v in bound
                                if n in mine or n in written
                                or (v.array and not _only_read(run, n)))
            varying = " ".join(plan.varying.values())
            skip = "if (__kp_wx[__kp_i]) continue; " if plan.exits else ""
            plan.edit(run[0].start_byte, run[0].start_byte,
                      f"for (uint32_t __kp_i = 0; __kp_i < __kp_n; __kp_i++) {{ {skip}"
                      "const __kp_thread __kp_wl = __kp_wi_item(__kp_gl, __kp_g, __kp_i); "
                      "const __kp_thread* const __kp_t = &__kp_wl; const __kp_thread& "
                      "__kp_wi_here = __kp_wl; (void)__kp_t; (void)__kp_wi_here; "
                      f"{varying} {remat} {copy_in} {{ ")
            plan.edit(run[-1].end_byte, run[-1].end_byte, f" }} {label}: ; {copy_out} }}")
            scope += own
            i = j


def _only_read(run: list[Node], name: str) -> bool:
    """Whether array ``name`` appears in ``run`` only indexed (``a[i]``, ``a[i][j]``), so
    it cannot change through a pointer it decays to (assignments are checked apart)."""
    for r in run:
        for x in _walk(r):
            if x.type == "identifier" and _text(x) == name:
                up = x.parent
                if up is None or up.type != "subscript_expression" or (
                        up.child_by_field_name("argument") != x):
                    return False
    return True


def _copy(local: str, v: _Var, way: str) -> str:
    slot = f"&__kp_wiV{v.index}[__kp_i]"
    to, frm = (local, slot) if way == "in" else (slot, local)
    return f"__kp_wi_{way}({to}, {frm});"


def _declares(s: Node) -> set[str]:
    if s.type != "declaration":
        return set()
    out = set()
    for d in s.children_by_field_name("declarator"):
        try:
            out.add(_declared_name(d))
        except NotFormed:
            pass
    return out


def _nested(s: Node, plan: _Plan, names: set[str], scope, in_loop: bool) -> None:
    """A `for` or `if` holding barriers: its header must be uniform; its bodies are blocks."""
    line = s.start_point[0] + 1
    if s.type == "if_statement":
        cond = s.child_by_field_name("condition")
        value = cond.child_by_field_name("value") if cond is not None else None
        if value is None or not _uniform(value, plan, names):
            raise NotFormed(f"line {line}: a barrier under an `if` whose condition is not "
                            "provably uniform")
        _block(_statements(s.child_by_field_name("consequence")), plan, names, scope, in_loop)
        alt = s.child_by_field_name("alternative")
        if alt is not None:
            body = alt.named_children[-1] if alt.type == "else_clause" else alt
            _block(_statements(body), plan, names, scope, in_loop)
        return
    if s.type != "for_statement":
        raise NotFormed(f"line {line}: a barrier inside a `{s.type.split('_')[0]}` statement")
    init = s.child_by_field_name("initializer")
    counters = set()
    if init is not None:
        if init.type != "declaration":
            raise NotFormed(f"line {line}: a loop holding a barrier must declare its counter")
        for d in init.children_by_field_name("declarator"):
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            if value is None or not _uniform(value, plan, names | counters):
                raise NotFormed(f"line {line}: a loop holding a barrier starts from a value "
                                "not provably uniform")
            counters.add(_declared_name(d))
    inner = names | counters
    body = s.child_by_field_name("body")
    if counters & (_modified_names(body) | _rebound(plan.root, body)):
        raise NotFormed(f"line {line}: the body of a loop holding a barrier changes its counter")
    cond, update = s.child_by_field_name("condition"), s.child_by_field_name("update")
    if cond is not None and not _uniform(cond, plan, inner):
        raise NotFormed(f"line {line}: a loop holding a barrier has a condition not provably "
                        "uniform")
    if update is not None:
        for part in ([update] if update.type != "comma_expression" else update.named_children):
            if part.type not in _ASSIGN or not all(_uniform(c, plan, inner)
                                                   for c in part.named_children):
                raise NotFormed(f"line {line}: a loop holding a barrier has a step not provably "
                                "uniform")
    _block(_statements(body), plan, inner, scope, True)


def form_regions(src: str, kernel: str, *, language: str, barrier: str, uniform: set[str],
                 varying: dict[str, str], per_thread: frozenset[str] = frozenset()) -> str:
    """``src`` with kernel function ``kernel`` rewritten to run a whole group per call, in
    work-item loops; NotFormed (why, in one line) where that is not provably safe.
    ``uniform``: names of built-ins with one value per group; ``varying``: kernel parameters
    that differ per thread, each with the declaration that recomputes it for one thread;
    ``per_thread``: built-ins that read the thread's position (CUDA's threadIdx)."""
    data = src.encode()
    root = parse(data, language)
    found = [n for n in _walk(root) if n.type == "function_definition"
             and _function_name(n) == kernel]
    if len(found) != 1:
        raise NotFormed(f"{len(found)} definitions of `{kernel}`")
    fn = found[0]
    body = fn.child_by_field_name("body")
    total = sum(1 for x in _walk(root) if x.type == "identifier" and _text(x) == barrier)
    for x in _walk(root):
        if x.type in ("preproc_def", "preproc_function_def") and x.child_by_field_name("value"):
            value = _text(x.child_by_field_name("value"))
            if any(w in value.split() or w + ";" in value for w in ("return", "break", "continue",
                                                                    "goto", barrier)):
                raise NotFormed(f"line {x.start_point[0] + 1}: a macro holding control flow "
                                "or a barrier")
    names = set(uniform)
    decl = fn.child_by_field_name("declarator")
    for p in decl.child_by_field_name("parameters").named_children:
        d = p.child_by_field_name("declarator")
        if d is not None and p.type == "parameter_declaration":
            try:
                names.add(_declared_name(d))
            except NotFormed:
                names.add(next((_text(x) for x in _walk(d) if x.type == "identifier"), ""))
    if fn.parent is not None and fn.parent.type == "template_declaration":
        for p in fn.parent.child_by_field_name("parameters").named_children:
            names |= {_text(x) for x in p.children if x.type in ("identifier", "type_identifier")}
    names |= _object_macros(root, names)
    rebound = _rebound(root, body)
    params = names & rebound - set(uniform)
    if params:  # one copy serves the whole group: a thread may not change it
        raise NotFormed(f"the kernel body changes its parameter `{sorted(params)[0]}`")
    plan = _Plan(data, barrier, varying, modified=_modified_names(body) | rebound,
                 root=root, per_thread=set(per_thread) | set(varying),
                 declared=_declaration_counts(fn),
                 exits=any(x.type == "return_statement" for x in _walk(body)))
    names -= plan.modified | set(varying)
    _block(_statements(body), plan, names, [], False)
    _check_pointers(plan, body)
    if plan.barriers != total:
        raise NotFormed(f"{total - plan.barriers} `{barrier}` outside the kernel body's "
                        "statement lists")
    # __kp_wx: a flag a thread, set when it returned; __kp_wd: how many did
    flags = "__kp_wi_flags(__kp_n)" if plan.exits else "nullptr"
    head = ("__kp_thread __KP_RT* const __kp_g = __kp_cur; const __kp_wi_grp __kp_gl = "
            "__kp_wi_group(__kp_g); const uint32_t __kp_n = __kp_wi_count(__kp_g); "
            f"unsigned char __KP_RT* const __kp_wx = (unsigned char __KP_RT*){flags}; "
            "uint32_t __kp_wd = 0; (void)__kp_wd; "
            + " ".join(f"{v.typedef} __kp_wiT{v.index}* const __kp_wiV{v.index} = "
                       f"(__kp_wiT{v.index}*)__kp_wi_alloc(sizeof(__kp_wiT{v.index}), "
                       f"alignof(__kp_wiT{v.index}), __kp_n);" for v in plan.hoisted))
    plan.edit(body.start_byte + 1, body.start_byte + 1, " " + head)
    return _apply(data, plan.edits)


def _declaration_counts(fn: Node) -> dict[str, int]:
    """How often each name is declared in function ``fn`` (parameters included)."""
    counts: dict[str, int] = {}
    for n in _walk(fn):
        for d in n.children_by_field_name("declarator"):
            if d.type == "identifier":
                counts[_text(d)] = counts.get(_text(d), 0) + 1
    return counts


def _check_pointers(plan: _Plan, body: Node) -> None:
    """A live pointer local may not point at a local (threadgroup storage and buffers are
    fine): each region has its own copy of those, so the address would not survive."""
    locals_, holders = set(), set()  # all locals; those that are arrays or pointers
    for d in _walk(body):
        if d.type != "declaration" or "__kp_tg_alloc" in _text(d) or "__kp_dyn_smem" in _text(d):
            continue
        for decl in d.children_by_field_name("declarator"):
            try:
                name = _declared_name(decl)
            except NotFormed:
                continue
            locals_.add(name)
            if any(x.type in ("pointer_declarator", "array_declarator") for x in _walk(decl)):
                holders.add(name)
    for name, decl in plan.pointers:
        sources = [decl]
        for n in _walk(body):
            if n.type == "assignment_expression" and _text(n.child_by_field_name("left")) == name:
                sources.append(n.child_by_field_name("right"))
        for src in sources:
            taken = {_text(x.child_by_field_name("argument")) for x in _walk(src)
                     if x.type == "pointer_expression" and _text(x.children[0]) == "&"}
            if ((_idents(src) - {name}) & holders) | (taken & locals_):
                raise NotFormed(f"line {src.start_point[0] + 1}: pointer `{name}` to a local "
                                "lives across a barrier")


def _object_macros(root: Node, names: set[str]) -> set[str]:
    """Object-like macros whose replacement is a uniform expression (literals, known names)."""
    out: set[str] = set()
    for x in _walk(root):
        if x.type != "preproc_def" or x.child_by_field_name("value") is None:
            continue
        value = _text(x.child_by_field_name("value")).strip()
        expr = parse(f"int __kp_m = {value};".encode(), "cpp")
        inits = [n for n in _walk(expr) if n.type == "init_declarator"]
        if (not expr.has_error and inits
                and _uniform(inits[0].child_by_field_name("value"),
                             _Plan(b"", "", {}), names | out)):
            out.add(_text(x.child_by_field_name("name")))
    return out


def _function_name(fn: Node) -> str:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    if d is None:
        return ""
    name = d.child_by_field_name("declarator")
    return _text(name) if name is not None else ""


def _apply(data: bytes, edits: list[tuple[int, int, str]]) -> str:
    out, pos = [], 0
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1])):
        if start < pos:
            raise NotFormed("overlapping rewrites (internal)")
        gap = data[start:end].count(b"\n") - text.count("\n")
        out += [data[pos:start], text.encode() + b"\n" * max(0, gap)]
        pos = end
    out.append(data[pos:])
    return b"".join(out).decode()
