"""The translator's emitter: one CUDA function's tree-sitter AST -> Metal text.

Leaves are copied with the source's own spacing and comments; a node is replaced when a rewrite
of kb/rules/rewrites.toml matches it (calls, builtins, qualifiers) or a structural rule applies:
address spaces on pointer declarations and casts, atomic outputs and threadgroup atomics,
in-place (inout) arguments, builtins passed into header functions, dynamic shared memory. Every
CUDA construct the rules know is counted as mapped or left with a ``KPORT-TODO(rule)`` note.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from tree_sitter import Node

from agent.translate import wmma
from agent.translate.analyze import PARAMETER_NODES, root_name
from agent.translate.atomics import RELAXED, AtomicRewrites
from agent.translate.cub import MEMBERS as CUB_MEMBERS
from agent.translate.cub import NAMESPACE as CUB_NAMESPACE
from agent.translate.folding import Value, constexpr_values, fold
from agent.translate.helpers import HELPERS
from agent.translate.inplace import InPlace
from agent.translate.param_spaces import HelperParamSpaces
from agent.translate.ref_args import RefArguments, declares_reference
from agent.translate.shared_align import aligned_shared
from agent.translate.thread_casts import declarator_kinds, in_thread_memory
from kb.rewrites import RewriteTable
from runners.metal_sim.codegen import ATTRIBUTES as MLX_ATTRIBUTES

# Metal attribute names with their MLX types (MLX's own table, as metal_sim models it): MLX
# declares them only for the kernel body, so header functions that use them get them as extra
# parameters.
ATTRIBUTES = dict(MLX_ATTRIBUTES)

# Scalar spellings (CUDA or Metal) -> one name per element type, to tell whether a vector of
# them views an array element by element.
_SCALAR_KIND = {"float": "f32", "half": "f16", "__half": "f16", "bfloat": "bf16",
                "bfloat16_t": "bf16", "__nv_bfloat16": "bf16", "uchar": "u8", "uint8_t": "u8",
                "unsigned char": "u8", "char": "i8", "int8_t": "i8", "signed char": "i8",
                "int": "i32", "int32_t": "i32", "uint": "u32", "uint32_t": "u32",
                "unsigned int": "u32", "unsigned": "u32", "short": "i16", "int16_t": "i16",
                "ushort": "u16", "uint16_t": "u16"}
SPACE_RULE = "memory.conditional_address_space"
_NAMES = {"identifier", "type_identifier", "primitive_type", "field_identifier",
          "namespace_identifier"}


@dataclass
class Context:
    """What the emitter knows about the kernel being translated."""

    table: RewriteTable
    constructs: dict[str, str]  # CUDA spelling -> the rule id that names it
    device_ptrs: set[str] = field(default_factory=set)  # names of device-memory pointers
    shared: set[str] = field(default_factory=set)  # threadgroup arrays
    atomic: set[str] = field(default_factory=set)  # names whose accesses must be atomic
    atomic_scalars: set[str] = field(default_factory=set)  # threadgroup atomic scalars
    inout: dict[str, int] = field(default_factory=dict)  # inout arg -> byte of its first write
    aliases: dict[str, str] = field(default_factory=dict)  # local pointer -> the inout it views
    readonly: set[str] = field(default_factory=set)  # names of const device pointers (inputs)
    # pointers into MLX inputs (maybe `constant`) -> the kind of their elements (_SCALAR_KIND)
    input_kinds: dict[str, str] = field(default_factory=dict)
    views: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # name -> (base, V, N)
    split_params: dict[str, set[int]] = field(default_factory=dict)  # fn -> in-place params
    ref_params: dict[str, set[int]] = field(default_factory=dict)  # fn -> non-const refs
    extra_params: dict[str, list[str]] = field(default_factory=dict)  # fn -> attribute params
    # types of extra params that are no MLX attribute (a helper's hoisted __shared__ array)
    param_types: dict[str, str] = field(default_factory=dict)
    hoisted_locals: dict[tuple[str, str], str] = field(default_factory=dict)  # (fn, local) ->
    tg_params: dict[str, set[int]] = field(default_factory=dict)  # fn -> threadgroup ptr params
    thread_params: dict[str, set[int]] = field(default_factory=dict)  # fn -> thread ptr params
    # fn -> pointer params it never writes: `const device`, which takes inputs and outputs
    read_params: dict[str, set[int]] = field(default_factory=dict)
    smem_sizes: dict[str, str] = field(default_factory=dict)  # extern shared name -> size expr
    helpers: set[str] = field(default_factory=set)  # HELPERS the header must define
    mapped: Counter = field(default_factory=Counter)
    todo: Counter = field(default_factory=Counter)
    todos: list[tuple[str, str, int]] = field(default_factory=list)  # (rule, construct, line)
    rules_used: set[str] = field(default_factory=set)
    macros: set[str] = field(default_factory=set)  # the user's #defines: never rewritten
    known: set[str] = field(default_factory=set)  # names the source declares (analyze)
    wide: set[str] = field(default_factory=set)  # pointers to 64-bit integers
    # values known at port time: file-scope constexprs; in the kernel also its template
    # arguments and constexpr locals (folding.py)
    file_constants: dict[str, Value] = field(default_factory=dict)
    kernel_constants: dict[str, Value] = field(default_factory=dict)


class Emitter(AtomicRewrites, InPlace, HelperParamSpaces, RefArguments):
    def __init__(self, data: bytes, ctx: Context, in_kernel: bool):
        self.data, self.ctx, self.in_kernel = data, ctx, in_kernel
        self.replaced: dict[tuple[int, int], str] = {}  # (start, end byte) -> Metal text
        self.writes_seen: dict[tuple, list] = {}  # InPlace's

    def text(self, n: Node) -> str:
        return self.data[n.start_byte:n.end_byte].decode(errors="replace")

    def emit(self, node: Node) -> str:
        """``node`` as Metal."""
        if (node.start_byte, node.end_byte) in self.replaced:
            return self.replaced[(node.start_byte, node.end_byte)]
        if node.type == "gnu_asm_expression":  # PTX runners/ptx.py did not lower
            return self._todo("asm", "intrinsics.inline_ptx", node, "PTX kport does not lower")
        special = self._special(node)
        if special is not None:
            return special
        if node.child_count == 0:
            return self._leaf(node)
        return self._children(node)

    def _children(self, node: Node) -> str:
        """``node`` as Metal with no structural rule for the node itself: its children each
        emitted, the text between them kept."""
        out, pos = [], node.start_byte
        for c in node.children:
            out.append(self.data[pos:c.start_byte].decode(errors="replace"))
            out.append(self.emit(c))
            pos = c.end_byte
        out.append(self.data[pos:node.end_byte].decode(errors="replace"))
        return "".join(out)

    # -- leaves: builtins, qualifiers, same-in-Metal spellings, unmapped constructs
    def _leaf(self, node: Node) -> str:
        t = self.text(node)
        ctx = self.ctx
        if node.type == "preproc_arg":
            return self._macro_text(node)
        if t in ctx.macros:  # the user's `#define WARP_SIZE 32` is theirs, not warpSize
            return t
        if node.type == "namespace_identifier" and node.next_named_sibling is not None:
            return self._scope(node, t)
        for table in (ctx.table.idents, ctx.table.tokens):
            if t in table:
                self._mapped(t, table[t].rule)
                return table[t].to
        if t in ctx.table.same:
            self._mapped(t, ctx.table.same[t].rule)
            return t
        if t in ctx.constructs and (node.type == t or node.type in _NAMES):
            return self._todo(t, ctx.constructs[t], node)
        return t

    def _scope(self, node: Node, scope: str) -> str:
        """The namespace of ``scope::member``: where MSL keeps the member under another
        namespace (`std::numeric_limits` is `metal::numeric_limits`), that one; another std
        member is a TODO (MSL has no std); a user's own namespace stays."""
        member = re.split(r"[<:\s]", self.text(node.next_named_sibling), maxsplit=1)[0]
        rewrite = self.ctx.table.scoped.get(f"{scope}::{member}")
        if rewrite is not None and (scope == "std" or scope not in self.ctx.known):
            self._mapped(f"{scope}::{member}", rewrite.rule)
            if rewrite.to in HELPERS:  # a host library's type kport carries (kport_c10)
                self.ctx.helpers.add(rewrite.to)
            return rewrite.to
        if scope == "cub" and scope not in self.ctx.known:  # kport's CUB in Metal (cub.py)
            if member in CUB_MEMBERS:
                self._mapped(f"cub::{member}", CUB_MEMBERS[member])
                return CUB_NAMESPACE
            return self._todo(f"cub::{member}", "types.unknown_name", node,
                              f"kport's Metal CUB has no cub::{member}")
        if scope == "std":
            return self._todo(f"std::{member}", "types.std_library", node,
                              f"MSL has no std::{member}")
        if scope in wmma.SCOPES and scope not in self.ctx.known:  # kport's wmma (wmma.py)
            return wmma.scope(self, node, scope, member)
        if scope in self.ctx.constructs and scope not in self.ctx.known:
            return self._todo(scope, self.ctx.constructs[scope], node)
        if scope not in self.ctx.known and scope != "metal":
            return self._todo(f"{scope}::{member}", "types.unknown_name", node,
                              f"{scope} is defined nowhere in the source or its headers")
        return scope

    def _macro_text(self, node: Node) -> str:
        """A macro's replacement text (a raw token run to tree-sitter), name by name: what the
        tables rewrite as a name is rewritten; a CUDA call or construct behind a macro
        (`#define SHFL_DOWN_SYNC __shfl_down_sync`) cannot be translated where it is not
        called, so it is a counted TODO, never passed through as if translated."""
        ctx, text = self.ctx, self.text(node)
        calls = ctx.table.call_names()
        out, pos, todos = [], 0, []
        for m in re.finditer(r"[A-Za-z_]\w*", text):
            name, word = m[0], m[0]
            if name in ctx.macros:
                pass
            elif name in ctx.table.idents or name in ctx.table.tokens:
                rewrite = ctx.table.idents.get(name) or ctx.table.tokens[name]
                self._mapped(name, rewrite.rule)
                word = rewrite.to
            elif name in ctx.table.same:
                self._mapped(name, ctx.table.same[name].rule)
            elif name in calls or name in ctx.constructs:
                rule = ctx.constructs.get(name) or next(
                    rw.rule for (n, _), rw in ctx.table.calls.items() if n == name)
                ctx.todo[name] += 1
                ctx.todos.append((rule, name, node.start_point[0] + 1))
                todos.append(f"KPORT-TODO({rule}): {name} behind a macro; call it directly")
            out.append(text[pos:m.start()] + word)
            pos = m.end()
        out.append(text[pos:])
        return "".join(out) + "".join(f" /* {t} */" for t in todos)

    def emit_children_between(self, node: Node) -> str:
        """The children of a bracketed node (its first and last child dropped), emitted."""
        kids = node.children
        out, pos = [], kids[0].end_byte
        for c in kids[1:-1]:
            out.append(self.data[pos:c.start_byte].decode(errors="replace"))
            out.append(self.emit(c))
            pos = c.end_byte
        out.append(self.data[pos:kids[-1].start_byte].decode(errors="replace"))
        return "".join(out)

    def _mapped(self, construct: str, rule: str) -> None:
        self.ctx.mapped[construct] += 1
        self.ctx.rules_used.add(rule)

    def _todo(self, construct: str, rule: str, node: Node, why: str = "") -> str:
        self.ctx.todo[construct] += 1
        self.ctx.todos.append((rule, construct, node.start_point[0] + 1))
        note = f": {why}" if why else ""
        return f"{self.text(node)} /* KPORT-TODO({rule}){note} */"

    # -- structural rewrites
    def _special(self, node: Node) -> str | None:
        t = node.type
        if t == "expression_statement" and node.named_children and \
                node.named_children[0].type == "call_expression":
            temps = self._ref_temps(node.named_children[0])
            if temps is not None:
                return temps
        if t in ("subscript_expression", "pointer_expression"):
            got = self._vector_read(node)
            if got is not None:
                return got
        if t == "call_expression":
            fn = node.child_by_field_name("function")
            if fn is not None and self.text(fn) == "__ldg" and len(self._args(node)) == 1:
                got = self._vector_read(node)
                if got is not None:
                    self._mapped("__ldg", "memory.ldg")
                    return got
            return self._call(node)
        if t == "assignment_expression":
            return self._assignment(node)
        if t == "conditional_expression":
            return self._conditional(node)
        if t == "lambda_expression":  # MSL 3.1/3.2 have none; a rewrite needs the header
            return self._todo("lambda", "types.lambda", node, "MSL before 4.0 has no lambdas: "
                              "move it into a helper function in the header")
        if self._atomic_read(node):
            return f"atomic_load_explicit(&{self._plain(node)}, {RELAXED})"
        if t == "identifier":
            return self._inout_name(node)
        if t in (*PARAMETER_NODES, "declaration", "type_descriptor", "field_declaration"):
            return self._declaration(node)
        if t == "parameter_list" and not self.in_kernel:
            fn = self._enclosing_fn(node)
            extra = self.ctx.extra_params.get(fn or "")
            if extra:
                inner = self.data[node.start_byte + 1:node.end_byte - 1].decode()
                done = self.emit_children_between(node)
                decls = ", ".join(f"{self.ctx.param_types.get(a) or ATTRIBUTES[a]} {a}"
                                  for a in extra)
                return f"({done}{', ' if inner.strip() else ''}{decls})"
        if t == "sized_type_specifier":
            words = self.text(node).split()
            if words.count("long") == 2:
                self._mapped("long long", "types.long_long")
                return "ulong" if "unsigned" in words else "long"
        if t == "launch_bounds":
            self._mapped("__launch_bounds__", "launch.launch_bounds")
            return ""
        return None

    def _conditional(self, node: Node) -> str | None:
        """``c ? a : b`` with ``a`` and ``b`` in different memories (MSL gives it no type):
        the branch this instantiation takes when ``c`` is known at port time, else a TODO."""
        kept = self._kept_branch(node)
        if kept is None:
            return None
        if kept == node:
            return self._todo("?: across address spaces", SPACE_RULE, node,
                              "the branches point into different memories and the condition "
                              "is not known at port time: split the code by the condition")
        self._mapped("?: across address spaces", SPACE_RULE)
        return f"({self.emit(kept)})"

    def _kept_branch(self, node: Node) -> Node | None:
        """The branch of ``c ? a : b`` whose memory differs from the other's that ``c``
        selects at port time; ``node`` itself when ``c`` does not fold; None when both
        branches share a memory (or either's is unknown): the ternary stays."""
        a, b = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
        spaces = {self._memory_of(a), self._memory_of(b)}
        if None in spaces or len(spaces) == 1:
            return None
        constants = self.ctx.kernel_constants
        if not self.in_kernel:  # a helper's: its parameters and locals may shadow a constant
            fn = node.parent
            while fn is not None and fn.type != "function_definition":
                fn = fn.parent
            constants = constexpr_values(fn, self.data, self.ctx.file_constants) \
                if fn is not None else self.ctx.file_constants
        value = fold(node.child_by_field_name("condition"), self.data, constants)
        return node if value is None else (a if value else b)

    def _dead_branch(self, node: Node) -> Node | None:
        """The branch of a ternary that _conditional leaves out, if any."""
        kept = self._kept_branch(node) if node.type == "conditional_expression" else None
        if kept is None or kept == node:
            return None
        a, b = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
        return b if kept == a else a

    def _memory_of(self, node: Node | None) -> str | None:
        root = self._root_name(node) if node is not None else None
        if root in self.ctx.shared:
            return "threadgroup"
        if root in self.ctx.device_ptrs | self.ctx.readonly | set(self.ctx.inout):
            return "device"
        return None

    def _args(self, call: Node) -> list[Node]:
        args = call.child_by_field_name("arguments")
        return [a for a in (args.named_children if args else []) if a.type != "comment"]

    def _call(self, node: Node) -> str | None:
        fn = node.child_by_field_name("function")
        if fn is None:
            return None
        name = self.text(fn)
        args = self._args(node)
        rw = self.ctx.table.calls.get((name, len(args)))
        if rw is not None:
            self._mapped(name, rw.rule)
            filled = [self.emit(a) for a in args]
            self.ctx.helpers.update(h for h in HELPERS if h in rw.to)  # kport_erf, ...
            return rw.to.format(*filled)
        atomic = self.ctx.table.atomics.get(name)
        if atomic is not None and atomic.to and args:
            got = self._atomic_call(atomic, node, args)
            if got is not None:
                return got
        base = name.split("<")[0]
        extra = self.ctx.extra_params.get(base, [])
        split = self.ctx.split_params.get(base, set())
        if extra or split:  # attributes passed in; in-place data as a read and a write pointer
            parts = []
            for i, a in enumerate(args):
                parts += [self._read_version(a), self._plain_out(a)] if i in split \
                    else [self.emit(a)]
            return f"{self.emit(fn)}({', '.join(parts + extra)})"
        if self._unknown_callee(fn, base.strip()):
            base = base.strip()
            todo = self._todo(base, "types.unknown_name", fn,
                              f"{base} is defined nowhere in the source or its headers")
            return todo + self.emit(node.child_by_field_name("arguments"))
        return None

    def _unknown_callee(self, fn: Node, base: str) -> bool:
        """Whether ``fn`` (a call's function) is a plain name nothing defines: not the
        source's, not a CUDA construct or rewrite, not Metal's library (rewrites.toml)."""
        if fn.type == "template_function":
            fn = fn.child_by_field_name("name") or fn
        if fn.type != "identifier":
            return False
        table = self.ctx.table
        return not (base in self.ctx.known or base in table.library or base in table.same
                    or base in self.ctx.constructs or base in table.call_names()
                    or base in table.idents or base in table.atomics)

    def _read_version(self, node: Node) -> str:
        saved = self.ctx.inout
        self.ctx.inout = {k: 1 << 62 for k in saved}  # every use reads the input
        try:
            return self.emit(node)
        finally:
            self.ctx.inout = saved

    def _plain(self, node: Node) -> str:
        """``node`` emitted without turning its atomic reads into loads (an address)."""
        saved = self.ctx.atomic, self.ctx.atomic_scalars
        self.ctx.atomic, self.ctx.atomic_scalars = set(), set()
        try:
            return self.emit(node)
        finally:
            self.ctx.atomic, self.ctx.atomic_scalars = saved

    def _root_name(self, node: Node) -> str | None:
        return root_name(node, self.data)

    def _assignment(self, node: Node) -> str | None:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        op = node.child_by_field_name("operator")
        op = self.text(op) if op is not None else "="
        if left is not None and self._atomic_root(left):
            addr = f"&{self._plain(left)}"
            rhs = self.emit(right)
            if op == "=":
                return f"atomic_store_explicit({addr}, {rhs}, {RELAXED})"
            compound = self.ctx.table.compound_atomics()
            if op in compound:
                return f"{compound[op]}({addr}, {rhs}, {RELAXED})"
            return None
        if left is not None and self.ctx.inout:
            name = self._root_name(left)
            if name in self.ctx.inout and op != "=":
                # x[i] op= v  ->  x_out[i] = x?[i] op v: read where a read would, write the output
                read = self.emit(left)
                target = self._plain_out(left)
                return f"{target} = {read} {op[:-1]} ({self.emit(right)})"
            if name in self.ctx.inout:
                return f"{self._plain_out(left)} = {self.emit(right)}"
        return None

    def _declaration(self, node: Node) -> str | None:
        """Address spaces on pointer declarations and casts; dynamic shared memory."""
        text = self.text(node)
        if node.type == "declaration" and "__shared__" in text and "extern" in text:
            return self._extern_shared(node)
        if node.type == "declaration" and (aligned := aligned_shared(self, node)) is not None:
            return aligned
        if node.type == "declaration" and "__shared__" in text and not self.in_kernel and \
                _in_function_body(node):
            fn = self._enclosing_fn(node) or ""
            hoisted = [(local, p) for (f, local), p in self.ctx.hoisted_locals.items()
                       if f == fn and local in self._declared(node)]
            if hoisted:  # declared in the kernel, passed in: here a pointer to it
                self._mapped("__shared__", "memory.static_shared")
                return " ".join(f"{self.ctx.param_types[p]} {local} = {p};"
                                for local, p in hoisted)
            return self._todo("__shared__ in a helper", "memory.static_shared", node,
                              "MSL declares threadgroup memory only in a kernel: declare it in "
                              "the kernel and pass the helper a `threadgroup T*`")
        if node.type == "declaration" and "__shared__" in text and \
                self._declared(node) & self.ctx.atomic:
            return self._shared_atomic(node)
        if node.type in PARAMETER_NODES and not self.in_kernel and \
                declares_reference(node) and not _has_space(self.text(node)):
            # helper references are bound to thread-local values (device ones go through
            # temporaries: _ref_temps); a CUB TempStorage lives in threadgroup memory
            space = "threadgroup" if "::TempStorage" in text else "thread"
            return self._with_space(node, space, drop_const=False)
        if node.type == "declaration" and _in_function_body(node) and \
                re.match(r"\s*static\s+(?:const\s+)?constexpr\b", text):
            # a function's `static constexpr` local: MSL has no static locals, and a constant
            # expression is the same value without it
            self.ctx.rules_used.add("memory.constant_table")
            return self._children(node).lstrip().removeprefix("static").lstrip()
        if node.type == "field_declaration" and _static_data_member(text):
            # MSL keeps static data only in `constant` (MLX's steel kernels: `static constant
            # constexpr`); a traits class's `static constexpr int kNThreads` needs it
            self.ctx.rules_used.add("memory.constant_table")
            rest = self._children(node).lstrip().removeprefix("static").lstrip()
            return "static constant " + rest
        if node.type == "field_declaration" or not _declares_pointer(node):
            return None
        if node.type == "declaration" and self._declared(node) & set(self.ctx.aliases):
            return self._alias_declaration(node)
        if node.type == "declaration":
            got = self._input_view_declaration(node)
            if got is not None:
                return got
        if node.type in PARAMETER_NODES and not self.in_kernel:
            fn = self._enclosing_fn(node) or ""
            if self._param_index(node) in self.ctx.split_params.get(fn, set()):
                return self._read_write_twins(node, self._declared(node), ", ")
        space = self._space_for(node)
        if space is None and _only_reference(node) and node.type in ("declaration",
                                                                     "type_descriptor"):
            space = "thread"  # a reference to nothing in device or threadgroup memory: a local
        if space is None:
            if node.type == "declaration" and any(c.type == "init_declarator"
                                                  for c in node.named_children):
                # a pointer whose memory the translator cannot trace: say so, never guess
                rule = "memory.pointer_params_address_space"
                self.ctx.todo["pointer address space"] += 1
                self.ctx.todos.append((rule, "pointer address space", node.start_point[0] + 1))
                return (f"{self._children(node)} /* KPORT-TODO({rule}): which memory does it "
                        "point into? write device, threadgroup or thread */")
            return None
        if node.type == "declaration":  # what it points into, for pointers derived from it
            (self.ctx.shared if space == "threadgroup" else self.ctx.device_ptrs).update(
                self._declared(node))
        return self._with_space(node, space, drop_const=False)

    def _space_for(self, node: Node) -> str | None:
        text = self.text(node)
        if any(s in text.split() for s in ("device", "threadgroup", "constant", "thread")):
            return None
        names = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if n.type == "identifier":
                names.add(self.text(n))
            stack.extend(c for c in n.children if c != self._dead_branch(n))
        if node.type in PARAMETER_NODES:
            fn = self._enclosing_fn(node) or ""
            idx = self._param_index(node)
            if idx in self.ctx.tg_params.get(fn, set()):
                return "threadgroup"
            # every definition of the name alike: `load_global<16, LoadPolicy::CacheGlobal>`
            # must keep the spaces of the template it specialises
            if idx in self.ctx.thread_params.get(self._enclosing_fn(node, bare=True), set()):
                return "thread"
            return "const device" if "const" not in text.split() and (
                idx in self.ctx.split_params.get(fn, set()) or
                idx in self.ctx.read_params.get(self._enclosing_fn(node, bare=True), set())) \
                else "device"
        operand = _initializer(node)
        if node.type == "type_descriptor":
            p = node.parent
            while p is not None and p.type not in ("cast_expression", "call_expression"):
                p = p.parent
            if p is not None:
                names = {self.text(n) for n in _identifiers(p)}
                operand = p.child_by_field_name("value") if p.type == "cast_expression" \
                    else (self._args(p) or [None])[0]
        if in_thread_memory(operand, self.data):  # a cast of a local array (thread_casts.py)
            return "thread"
        if node.type == "declaration":  # what it is initialised from, not its own name (a
            names -= self._declared(node)  # local `s` may shadow a parameter `s`)
        if (space := self._helper_param_space(node, names)) is not None:
            return space
        if names & self.ctx.shared:
            return "threadgroup"
        writable = {n for n in names & set(self.ctx.inout)
                    if self.ctx.inout[n] < 0 or node.start_byte >= self.ctx.inout[n]}
        if (names & (self.ctx.readonly | set(self.ctx.inout))) - writable \
                and "const" not in text.split():
            return "const device"
        if names & (self.ctx.device_ptrs | set(self.ctx.inout)):
            return "device"
        return None

    def _declared(self, node: Node) -> set[str]:
        out = set()
        for c in node.named_children:
            if c.type in ("init_declarator", "array_declarator", "pointer_declarator",
                          "identifier"):
                ids = [n for n in _identifiers(c.child_by_field_name("declarator") or c)]
                if ids:
                    out.add(self.text(ids[0]))
        return out

    def _alias_declaration(self, node: Node) -> str:
        """``float* row = x + r * n`` with x in-place: a read pointer and a write pointer."""
        return self._read_write_twins(node, self._declared(node) & set(self.ctx.aliases), " ")

    def _read_write_twins(self, node: Node, names: set[str], sep: str) -> str:
        """A pointer declaration (or parameter) as a const read twin and a ``_out`` write twin
        whose initializer uses the outputs."""
        read = self._with_space(node, "const device")
        saved = self.ctx.inout
        self.ctx.inout = {k: -1 for k in saved}
        try:
            write = self._with_space(node, "device")
        finally:
            self.ctx.inout = saved
        for n in names:
            write = re.sub(rf"\b{n}\b", f"{n}_out", write, count=1)
        return f"{read}{sep}{write}"

    def _with_space(self, node: Node, space: str, drop_const: bool = True) -> str:
        """The declaration with ``space`` before its type; its own ``const`` dropped (a read
        or write twin says its constness in ``space``) unless ``drop_const`` is False."""
        out, pos, done = [], node.start_byte, False
        for c in node.children:
            out.append(self.data[pos:c.start_byte].decode(errors="replace"))
            if drop_const and c.type == "type_qualifier" and self.text(c) == "const":
                pos = c.end_byte
                continue
            piece = self.emit(c)
            if not done and c.type in ("primitive_type", "type_identifier",
                                       "sized_type_specifier", "template_type", "dependent_type",
                                       "qualified_identifier"):
                piece, done = f"{space} {piece}", True
            out.append(piece)
            pos = c.end_byte
        out.append(self.data[pos:node.end_byte].decode(errors="replace"))
        text = "".join(out)
        return text.strip() if drop_const else text

    def _pointer_cast(self, node: Node) -> tuple[Node, Node] | None:
        """(target type, operand) when ``node`` (parentheses aside) casts to a pointer:
        ``(const float4*)x`` or ``reinterpret_cast<const float4*>(x)``."""
        while node.type == "parenthesized_expression" and node.named_children:
            node = node.named_children[0]
        if node.type == "cast_expression":
            target, operand = node.child_by_field_name("type"), node.child_by_field_name("value")
        elif node.type == "call_expression":
            fn, args = node.child_by_field_name("function"), self._args(node)
            if fn is None or fn.type != "template_function" or len(args) != 1 or \
                    self.text(fn.child_by_field_name("name")) != "reinterpret_cast":
                return None
            targs = fn.child_by_field_name("arguments")
            target = next((c for c in targs.named_children if c.type == "type_descriptor"),
                          None) if targs is not None else None
            operand = args[0]
        else:
            return None
        if target is None or operand is None or not _declares_pointer(target):
            return None
        return target, operand

    def _input_vector(self, target: Node, operand: Node) -> tuple[str, int] | None:
        """(V, N) when the cast views an MLX input's elements as vectors V of N of them."""
        root = root_name(operand, self.data)
        kind = self.ctx.input_kinds.get(root or "")
        spelled = self.emit(target.child_by_field_name("type")).strip()
        found = re.fullmatch(r"([a-z_]+?)([234])", spelled)
        if kind is None or found is None or _SCALAR_KIND.get(found.group(1)) != kind:
            return None
        return spelled, int(found.group(2))

    def _vector_read(self, node: Node) -> str | None:
        """``cast(x)[i]``, ``view[i]``, ``*(view + i)``, ``*view`` reading an input as vectors
        -> ``kport_vload<V, N>(x, i)``: valid whichever space MLX gives the input."""
        parent = node.parent
        if parent is not None and (parent.type == "update_expression" or (
                parent.type == "assignment_expression" and
                parent.child_by_field_name("left") == node)):
            return None  # a write: outputs are device memory, their casts stay
        if node.type == "subscript_expression":
            base, index = node.child_by_field_name("argument"), node.child_by_field_name("indices")
            if base is None or index is None or len(index.named_children) != 1:
                return None
            index_text = self.emit(index.named_children[0])
        elif node.type == "call_expression" or (self.text(node).startswith("*") and
                                                node.child_by_field_name("argument")):
            # *p, *(p + i), and __ldg(p + i), CUDA's read-only load of the same
            base, index_text = (self._args(node)[0] if node.type == "call_expression" else
                                node.child_by_field_name("argument")), "0"
            while base.type == "parenthesized_expression" and base.named_children:
                base = base.named_children[0]
            if base.type == "binary_expression" and \
                    self.text(base.child_by_field_name("operator")) == "+":
                index_text = self.emit(base.child_by_field_name("right"))
                base = base.child_by_field_name("left")
        else:
            return None
        if base.type == "identifier" and self.text(base) in self.ctx.views:
            pointer, vec, n = self.ctx.views[self.text(base)]
        else:
            cast = self._pointer_cast(base)
            got = self._input_vector(*cast) if cast else None
            if got is None:
                return None
            (vec, n), pointer = got, self.emit(cast[1])
        self.ctx.helpers.add("kport_vload")
        self._mapped("reinterpret_cast", "memory.vector_cast_device")
        return f"kport_vload<{vec}, {n}>({pointer}, {index_text})"

    def _input_view_declaration(self, node: Node) -> str | None:
        """``const V* v = cast(x);`` over an input: no pointer (it could not keep the input's
        space); reads of ``v`` become kport_vload calls. A pointer derived from an input
        without a cast is ``auto``: it takes the input's space, device or constant."""
        inits = [c for c in node.named_children if c.type == "init_declarator"]
        if len(inits) != 1 or (value := inits[0].child_by_field_name("value")) is None:
            return None
        names = self._declared(node)
        cast = self._pointer_cast(value)
        if cast is not None:
            got = self._input_vector(*cast)
            if got is None or not _declares_pointer(node):
                return None
            self.ctx.views[next(iter(names))] = (self.emit(cast[1]), *got)
            return f"// {self.text(node).strip()}  (reads: kport_vload)"
        root = root_name(value, self.data)
        if root not in self.ctx.input_kinds or "_cast" in self.text(value) or \
                not _declares_pointer(node) or "[" in self.text(inits[0].child_by_field_name(
                    "declarator")):
            return None
        for name in names:
            self.ctx.input_kinds[name] = self.ctx.input_kinds[root]
            self.ctx.device_ptrs.add(name)
            if root in self.ctx.readonly:  # its casts keep the const (`const device vec_t*`)
                self.ctx.readonly.add(name)
        return f"auto {next(iter(names))} = {self.emit(value)};"

    def _enclosing_fn(self, node: Node, bare: bool = False) -> str | None:
        """The name of the function whose parameters or body hold ``node`` (``bare``: without
        template arguments or scope, `mem_access::load_global<16, P::X>`: load_global)."""
        p = node.parent
        while p is not None and p.type not in ("function_declarator", "function_definition"):
            p = p.parent
        while p is not None and p.type != "function_declarator":  # a body: its definition's
            p = p.child_by_field_name("declarator")
        d = p.child_by_field_name("declarator") if p is not None else None
        if d is not None and bare:
            return self.text(d).split("<")[0].split("::")[-1]
        return self.text(d).split("::")[-1] if d is not None else None

    def _param_index(self, node: Node) -> int:
        params = [c for c in node.parent.named_children if c.type in PARAMETER_NODES]
        return params.index(node) if node in params else -1

    def _extern_shared(self, node: Node) -> str:
        decl = next((c for c in node.named_children if c.type == "array_declarator"), None)
        name_node = decl.child_by_field_name("declarator") if decl is not None else None
        if name_node is None:
            return self._todo("extern __shared__", "memory.dynamic_shared", node)
        name = self.text(name_node)
        ty = " ".join(self.text(c) for c in node.named_children
                      if c.type in ("primitive_type", "type_identifier", "sized_type_specifier"))
        size = self.ctx.smem_sizes.get(name)
        if size is None:
            return self._todo("extern __shared__", "memory.dynamic_shared", node,
                              "no shared_mem size for the launch")
        self._mapped("extern __shared__", "memory.dynamic_shared")
        rw = self.ctx.table.idents.get(ty)
        return f"threadgroup {rw.to if rw else ty} {name}[{size}];"


def _declares_pointer(node: Node) -> bool:
    """Does this declaration, parameter or type name declare a pointer or a reference (not
    merely contain a multiplication in its initializer)? MSL wants the memory of both."""
    return bool(declarator_kinds(node) & {"pointer_declarator", "abstract_pointer_declarator",
                                          "reference_declarator",
                                          "abstract_reference_declarator"})


def _only_reference(node: Node) -> bool:
    """A declaration or type name of a reference and no pointer."""
    kinds = declarator_kinds(node)
    return bool(kinds & {"reference_declarator", "abstract_reference_declarator"}) and not \
        kinds & {"pointer_declarator", "abstract_pointer_declarator"}


def _static_data_member(text: str) -> bool:
    """A ``static constexpr`` / ``static const`` data member without an address space."""
    head = text.split("=")[0]
    return bool(re.match(r"\s*static\b", head)) and "(" not in head and \
        bool(re.search(r"\b(?:constexpr|const)\b", head)) and "constant" not in head.split()


def _in_function_body(node: Node) -> bool:
    p = node.parent
    while p is not None and p.type != "function_definition":
        p = p.parent
    return p is not None


def _initializer(node: Node) -> Node | None:
    """The value of a declaration's single init declarator."""
    inits = [c for c in node.named_children if c.type == "init_declarator"]
    return inits[0].child_by_field_name("value") if len(inits) == 1 else None


def _has_space(text: str) -> bool:
    return any(s in text.split() for s in ("device", "threadgroup", "constant", "thread"))


def _identifiers(node: Node) -> list[Node]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            out.append(n)
        stack.extend(n.children)
    return out
