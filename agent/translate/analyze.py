"""What the translator needs to know about a CUDA kernel before emitting Metal: its parameters
and their roles, the functions it calls, shared memory, atomics, in-place arguments, template
parameters, the file-scope definitions it uses, and which header functions need the kernel's
attributes passed in. Read from the tree-sitter AST."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from agent.translate.atomics import WIDE_INTS, view_cast
from agent.translate.closure import header_nodes
from agent.translate.cub import THREAD_INDEX as CUB_THREAD_INDEX
from agent.translate.cub import data_effects as cub_data_effects
from agent.translate.cub import needs_thread_index, temp_storage_params
from agent.translate.dead_branches import prune as prune_dead_branches
from agent.translate.flow import (
    call_effects,
    callee_name,
    nested_splits,
    param_effects,
    thread_params,
)
from agent.translate.host_functions import host_function_error
from agent.translate.inplace import pointer_locals
from agent.translate.macro_calls import expand_macro_calls
from agent.translate.macros import (
    blank_qualifier_macros,
    defined_macros,
    expand_unbalanced_macros,
    template_parts,
)
from agent.translate.overloads import select as select_kernel
from agent.translate.pointer_fields import flatten as flatten_pointer_fields
from agent.translate.tree import _device_code, _fn_name, _text, _walk, aliases_in
from agent.translate.void_params import resolve as resolve_void_params
from agent.translate.wmma import effects as wmma_effects
from kb.parse import parse
from kb.rewrites import load_rewrites
from runners.errors import KportError
from runners.metal_sim.codegen import ATTRIBUTE_VALUES

TYPE_DTYPES = {"float": "float32", "half": "float16", "__half": "float16",
               "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "int": "int32",
               "unsigned": "uint32", "unsigned int": "uint32", "uint": "uint32",
               "int8_t": "int8", "uint8_t": "uint8", "signed char": "int8",
               "unsigned char": "uint8", "short": "int16", "int16_t": "int16",
               "unsigned short": "uint16", "uint16_t": "uint16", "int32_t": "int32",
               "uint32_t": "uint32", "bool": "bool", "int64_t": "int64", "long": "int64",
               "long long": "int64", "uint64_t": "uint64", "unsigned long long": "uint64",
               "double": "float64"}
# Other type names CUDA code calls like functions (`size_t(n)`, `make_`-less vectors).
C_TYPE_NAMES = {"size_t", "ptrdiff_t", "intptr_t", "uintptr_t", "dim3", "__half2", "half2",
                "__nv_bfloat162", "nv_bfloat162",
                *(f"{base}{n}" for base in ("char", "uchar", "short", "ushort", "int", "uint",
                                            "long", "ulong", "float", "double")
                  for n in (2, 3, 4))}


class TranslateError(KportError):
    """The kernel cannot be found or parsed; the message names the file and kernel."""


@dataclass
class Param:
    name: str
    type: str  # element type for pointers, the type for scalars
    pointer: bool
    const: bool
    default: str | None = None  # a C++ default value as written (`= 2.0f`)


@dataclass
class KernelInfo:
    data: bytes
    name: str
    kernel_node: Node
    kernel_outer: Node  # the kernel's definition with its `template <...>`, if any
    params: list[Param]
    roles: dict[str, str]
    dtypes: dict[str, str]
    inputs: list[str]
    outputs: list[str]
    outputs_cuda: list[str]
    callees: list[Node]
    header_nodes: list[Node]
    template: list[tuple[str, int | str]]
    shared: list[str] = field(default_factory=list)
    extern_shared: dict[str, str] = field(default_factory=dict)
    atomic_names: set[str] = field(default_factory=set)
    atomic_scalars: set[str] = field(default_factory=set)
    atomic_views: set[str] = field(default_factory=set)  # buffers an atomic reaches by a cast
    first_write: dict[str, int] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    split_params: dict[str, set[int]] = field(default_factory=dict)
    ref_params: dict[str, set[int]] = field(default_factory=dict)
    attribute_params: dict[str, list[str]] = field(default_factory=dict)
    threadgroup_params: dict[str, set[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    guessed: list[str] = field(default_factory=list)
    local_names: set[str] = field(default_factory=set)  # functions defined in the file
    # every name the source declares anywhere (functions, types, namespaces, template
    # parameters, variables, fields, enumerators, macros): what a call or scope may name
    known_names: set[str] = field(default_factory=set)
    macros: set[str] = field(default_factory=set)  # names the file #defines (never rewritten)
    # struct parameters passed by value: name -> (C type, fields for runners/structs.py); and
    # those kport cannot pass, with why
    struct_params: dict[str, tuple[str, list[dict]]] = field(default_factory=dict)
    struct_problems: dict[str, str] = field(default_factory=dict)
    nullable: list[str] = field(default_factory=list)  # input pointers tested against null
    flat: list = field(default_factory=list)  # pointer_fields.Flat: struct fields flattened
    # helpers' __shared__ arrays, declared in the kernel and passed in (_hoisted_shared)
    hoisted: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    thread_params: dict[str, set[int]] = field(default_factory=dict)  # fn -> thread ptr params
    read_params: dict[str, set[int]] = field(default_factory=dict)  # fn -> never-written ptrs


PARAMETER_NODES = ("parameter_declaration", "optional_parameter_declaration")


def _functions(root: Node, data: bytes) -> dict[str, tuple[Node, Node]]:
    """name -> (function_definition, the node to emit: its template_declaration if any), for
    the functions device code can call."""
    out: dict[str, tuple[Node, Node]] = {}
    for n in _walk(root):
        if n.type == "function_definition" and _device_code(n, data):
            name = _fn_name(n, data)
            outer = n.parent if n.parent is not None and n.parent.type == \
                "template_declaration" else n
            if name and name not in out:
                out[name] = (n, outer)
    return out


def _params(fn: Node, data: bytes) -> list[Param]:
    decl = next(n for n in _walk(fn) if n.type == "function_declarator")
    plist = decl.child_by_field_name("parameters")
    out = []
    for p in plist.named_children if plist else []:
        if p.type not in PARAMETER_NODES:
            continue
        ty = " ".join(_text(c, data) for c in p.named_children
                      if c.type in ("primitive_type", "type_identifier", "sized_type_specifier",
                                    "template_type", "qualified_identifier", "enum_specifier"))
        pointer = any(n.type in ("pointer_declarator", "abstract_pointer_declarator")
                      for n in _walk(p))
        const = any(c.type == "type_qualifier" and _text(c, data) == "const"
                    for c in p.children)
        names = [n for n in _walk(p.child_by_field_name("declarator") or p)
                 if n.type == "identifier"]
        if names:
            value = p.child_by_field_name("default_value")
            out.append(Param(_text(names[-1], data), ty, pointer, const and pointer,
                             _text(value, data) if value is not None else None))
    return out


def root_name(node: Node, data: bytes) -> str | None:
    """The variable an lvalue or pointer expression is rooted at: ``x`` for ``x[i]``, ``&x[i]``,
    ``x + k``, ``(x)``, ``v.x``, ``reinterpret_cast<float4*>(x)[i]``; None otherwise."""
    while node is not None and node.type in ("subscript_expression", "pointer_expression",
                                             "parenthesized_expression", "binary_expression",
                                             "cast_expression", "field_expression",
                                             "call_expression"):
        if node.type == "call_expression":  # reinterpret_cast<float4*>(x) views x
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            if fn is None or "_cast" not in _text(fn, data) or args is None or \
                    not args.named_children:
                return None
            node = args.named_children[0]
        elif node.type == "subscript_expression":
            node = node.child_by_field_name("argument")
        elif node.type == "binary_expression":
            node = node.child_by_field_name("left")
        elif node.type == "cast_expression":
            node = node.child_by_field_name("value")
        elif node.type == "field_expression":
            node = node.child_by_field_name("argument")
        else:
            node = node.named_children[-1] if node.named_children else None
    return _text(node, data) if node is not None and node.type == "identifier" else None


def _mutable_params(callees: dict[str, tuple[Node, Node]], data: bytes,
                    kinds: tuple[str, ...]) -> dict[str, set[int]]:
    """For each function, the indexes of its non-const parameters declared with one of
    ``kinds`` (``pointer_declarator``, ``reference_declarator``)."""
    out: dict[str, set[int]] = {}
    for name, (fn, _) in callees.items():
        decl = next(n for n in _walk(fn) if n.type == "function_declarator")
        plist = decl.child_by_field_name("parameters")
        params = [c for c in (plist.named_children if plist else [])
                  if c.type in PARAMETER_NODES]
        out[name] = {i for i, p in enumerate(params)
                     if any(n.type in kinds for n in _walk(p))
                     and not any(c.type == "type_qualifier" and _text(c, data) == "const"
                                 for c in p.children)}
    return out


def _template_params(plist: Node | None, data: bytes) -> list[tuple[str, bool, str | None]]:
    """(name, is a type, default text or None) of each template parameter."""
    out = []
    for p in plist.named_children if plist else []:
        typed = p.type in ("type_parameter_declaration", "optional_type_parameter_declaration",
                           "variadic_type_parameter_declaration")
        named = p.child_by_field_name("name") or p.child_by_field_name("declarator")
        if named is None:  # `typename T`: the name is the last identifier
            ids = [n for n in _walk(p) if n.type in ("identifier", "type_identifier")]
            named = ids[-1] if ids else None
        if named is None:
            continue
        if named.type not in ("identifier", "type_identifier"):  # `float (*op)(float)`
            named = next((x for x in _walk(named) if x.type == "identifier"), named)
        default = p.child_by_field_name("default_type") or p.child_by_field_name(
            "default_value")
        out.append((_text(named, data), typed,
                    _text(default, data) if default is not None else None))
    return out


def _type_aliases(root: Node, data: bytes) -> dict[str, str]:
    """``using index_t = uint32_t;`` / ``typedef int64_t index_t;`` anywhere in the source:
    name -> the type it stands for."""
    return aliases_in(root, data)


def struct_fields(root: Node, data: bytes, name: str, aliases: dict[str, str],
                  depth: int = 0) -> list[dict] | str:
    """The fields of struct ``name`` as the parsed source (``root``, ``data``) defines it,
    each ``{"name", "dtype"}`` (plus ``"count"`` for a fixed array, ``"fields"`` for a nested
    struct), in declaration order; or why kport cannot pass it (a pointer field, a CUDA
    vector field whose layout Metal does not share, a type it does not know). A parameter of
    such a struct travels as its bytes. ``aliases``: _type_aliases of the source."""
    spec = next((n for n in _walk(root) if n.type in ("struct_specifier", "class_specifier")
                 and n.child_by_field_name("body") is not None
                 and n.child_by_field_name("name") is not None
                 and _text(n.child_by_field_name("name"), data) == name), None)
    if spec is None:
        return f"struct {name} is not defined in the source read"
    if depth > 4:
        return f"struct {name} nests too deeply"
    out: list[dict] = []
    for f in spec.child_by_field_name("body").named_children:
        if f.type in ("comment", "access_specifier", "alias_declaration", "type_definition",
                      "function_definition", "declaration", "template_declaration"):
            continue  # a type alias, a method, a static: no part of the object's bytes
        if f.type != "field_declaration":
            return f"struct {name} has a {f.type.replace('_', ' ')}, not only data fields"
        if any(c.type == "storage_class_specifier" for c in f.children):
            continue  # a static member is no part of the object
        ty = f.child_by_field_name("type")
        spelled = " ".join(_text(ty, data).replace("struct ", "").split()) if ty else ""
        for _ in range(4):
            spelled = " ".join(aliases.get(spelled, spelled).split())
        for d in f.children_by_field_name("declarator"):
            kinds = [x.type for x in _walk(d)]
            if "reference_declarator" in kinds or kinds.count("pointer_declarator") > 1 or (
                    "pointer_declarator" in kinds and "array_declarator" in kinds):
                return f"struct {name}: field {_text(d, data)!r} is not passed yet"
            if "pointer_declarator" in kinds:  # its array is passed apart (pointer_fields.py)
                leaf = [x for x in _walk(d) if x.type == "field_identifier"]
                out.append({"name": _text(leaf[-1], data), "dtype": "pointer",
                            "pointee": _text(ty, data) if ty else "void"})
                continue
            count, leaf = 1, d
            while leaf.type == "array_declarator":
                size = leaf.child_by_field_name("size")
                try:
                    count *= int(_text(size, data), 0)
                except (ValueError, TypeError):
                    return f"struct {name}: array field {_text(d, data)!r} has no literal size"
                leaf = leaf.child_by_field_name("declarator")
            entry = {"name": _text(leaf, data)}
            if count > 1:
                entry["count"] = count
            if spelled in TYPE_DTYPES and TYPE_DTYPES[spelled] != "float64":
                entry["dtype"] = TYPE_DTYPES[spelled]
            elif spelled in ("size_t", "uint64_t", "unsigned long"):
                entry["dtype"] = "uint64"
            elif re.fullmatch(r"(?:u?(?:char|short|int|long)|float|double|half|__half)[2-4]|"
                              r"dim3|(?:__)?(?:half|nv_bfloat16)2", spelled):
                return (f"struct {name}: field {entry['name']!r} is a {spelled}, whose size "
                        "and alignment differ between CUDA and Metal")
            else:
                nested = struct_fields(root, data, spelled, aliases, depth + 1)
                if isinstance(nested, str):
                    return (f"struct {name}: field {entry['name']!r} has type {spelled!r}: "
                            + nested)
                entry["fields"] = nested
            out.append(entry)
    return out or f"struct {name} has no fields"


# CUDA vector types passed by value: their bytes as C lays out x, y, z (w); Metal reads them as
# its packed_ type (uint3 is 12 bytes in CUDA, 16 in Metal's unpacked form)
VECTOR_TYPE = re.compile(r"(u?char|u?short|u?int|float)([234])")
_VECTOR_BASE = {"char": "int8", "uchar": "uint8", "short": "int16", "ushort": "uint16",
                "int": "int32", "uint": "uint32", "float": "float32"}


def _struct_params(root: Node, data: bytes, params: list[Param], bound: set[str]
                   ) -> tuple[dict[str, tuple[str, list[dict]]], dict[str, str]]:
    """The struct parameters passed by value (each travels as its bytes: an input array):
    name -> (C type, fields); and why each other one cannot be passed."""
    passed, problems = {}, {}
    aliases = None  # read once, when a parameter may be a struct
    for p in params:
        spelled = " ".join(p.type.replace("const", " ").replace("struct ", " ").split())
        vector = VECTOR_TYPE.fullmatch(spelled)
        if not p.pointer and vector:  # a CUDA vector (uint3 fast-division constants)
            passed[p.name] = (spelled, [{"name": c, "dtype": _VECTOR_BASE[vector[1]]}
                                        for c in "xyzw"[:int(vector[2])]])
            continue
        if not p.pointer and spelled not in TYPE_DTYPES and spelled not in C_TYPE_NAMES \
                and spelled not in bound and not spelled.startswith("enum "):
            aliases = _type_aliases(root, data) if aliases is None else aliases
            fields = struct_fields(root, data, spelled, aliases)
            if isinstance(fields, list):
                passed[p.name] = (spelled, fields)
            else:
                problems[p.name] = fields
    return passed, problems


def template_params(src: str, kernel: str) -> list[tuple[str, bool, str | None]] | None:
    """(name, is a type, default text or None) of each template parameter of function
    ``kernel`` (name without arguments) in ``src``; [] for a plain function, None when ``src``
    does not define it."""
    data = blank_qualifier_macros(expand_unbalanced_macros(expand_macro_calls(src))).encode()
    funcs = _functions(parse(data, "cuda"), data)
    if kernel not in funcs:
        return None
    outer = funcs[kernel][1]
    if outer.type != "template_declaration":
        return []
    return _template_params(outer.child_by_field_name("parameters"), data)


def _template(outer: Node, spec_args: list[str], data: bytes, where: str,
              strict: bool = True) -> list[tuple]:
    if outer.type != "template_declaration":
        return []
    params = _template_params(outer.child_by_field_name("parameters"), data)
    if len(spec_args) > len(params):
        raise TranslateError(f"{where}: {len(spec_args)} template arguments given for "
                             f"{len(params)} parameters ({', '.join(n for n, _, _ in params)})")
    out = []
    for i, (name, typed, default) in enumerate(params):
        if i >= len(spec_args) and default is not None:
            v = default
        elif i >= len(spec_args) and not strict:
            out.append((name, name))  # left symbolic: a coverage count needs no values
            continue
        elif i >= len(spec_args):
            raise TranslateError(f"{where}: template parameter {name!r} has no value; name the "
                                 "kernel with its arguments, e.g. --kernel 'k<256>'")
        else:
            v = spec_args[i].strip()
        if typed:
            out.append((name, TYPE_DTYPES.get(v, v)))
        else:
            out.append((name, int(v, 0) if v.lstrip("-").isdigit() or v.startswith("0x")
                        else {"true": True, "false": False}.get(v, v)))
    return out


def analyze_kernel(src: str, kernel: str, where: str, roles: dict[str, str] | None = None,
                   strict: bool = True, flatten: bool = False,
                   origin: list[tuple[str, int]] | None = None) -> KernelInfo:
    """Everything the emitter needs about ``kernel`` in ``src``; TranslateError when it is not
    there (a host function's: host_functions.py, at its line by ``origin``). ``flatten``: a
    struct parameter's pointer fields become buffer parameters of their own (pointer_fields.py)
    and the ``if constexpr`` branches the instantiation never takes are dropped
    (dead_branches.py): what the translator needs, not the CUDA closure."""
    data = blank_qualifier_macros(expand_unbalanced_macros(expand_macro_calls(src))).encode()
    root = parse(data, "cuda")
    name, spec_args = template_parts(kernel)
    funcs = _functions(root, data)
    if name not in funcs:
        kernels = sorted(n for n, (f, _) in funcs.items() if "__global__" in _text(f, data)
                         .split("(")[0])
        raise TranslateError(host_function_error(root, data, name, where, kernels, origin)
                             or f"{where}: no kernel named {name!r}; kernels here: "
                             f"{', '.join(kernels) or 'none'}")
    kfn, kouter = select_kernel(root, data, name, spec_args, where, kernel) or funcs[name]
    params = _params(kfn, data)
    template = _template(kouter, spec_args, data, where, strict)
    if flatten:  # the translator's: `if constexpr` branches this instantiation never takes
        pruned = prune_dead_branches(data, root, kfn, _spelled_bindings(kouter, spec_args, data),
                                     template)
        if pruned != data:
            data, root = pruned, parse(pruned, "cuda")
            funcs = _functions(root, data)
            kfn, kouter = select_kernel(root, data, name, spec_args, where, kernel) or funcs[name]
    # struct parameters read before any flattening: pointer fields are still pointers there
    structs, struct_problems = _struct_params(root, data, params, {n for n, _ in template})
    flats, flat_problems = [], {}
    if flatten:
        flattened, flats, flat_problems = flatten_pointer_fields(
            data, root, kfn, structs, template, TYPE_DTYPES | {"size_t": "uint64"},
            {_text(x, data) for x in _walk(kfn) if x.type == "identifier"})
        if flattened != data:
            data = flattened
            root = parse(data, "cuda")
            funcs = _functions(root, data)
            kfn, kouter = select_kernel(root, data, name, spec_args, where, kernel) or \
                funcs[name]
            params = _params(kfn, data)
    body = kfn.child_by_field_name("body")
    why, void_notes = resolve_void_params(params, body, data, where)  # `const void * src0`
    if why:
        raise TranslateError(why)
    # the functions the kernel calls, transitively, callees first
    order: list[str] = []

    def visit(fn: Node) -> None:
        for n in _walk(fn):
            if n.type == "call_expression":
                f = n.child_by_field_name("function")
                if f is None:
                    continue
                callee = callee_name(f, data)
                if callee in funcs and callee not in order and callee != name:
                    order.append(callee)
                    visit(funcs[callee][0])
                    order.remove(callee)
                    order.append(callee)

    visit(kfn)
    callee_nodes = {n: funcs[n] for n in order}
    # what each callee does through its pointer parameters, to any depth (flow.py); a
    # non-const reference is written
    effects = wmma_effects(data) | param_effects(root, data, set(order))  # wmma's: wmma.py
    writes_through = {f: {i for i, e in effects.get(f, {}).items() if e.writes} | refs
                      for f, refs in _mutable_params(callee_nodes, data,
                                                     ("reference_declarator",)).items()}
    info = KernelInfo(data, name, kfn, kouter, params, {}, {}, [], [], [], [], [],
                      template, notes=void_notes)
    info.read_params = {f: {i for i, e in effects[f].items() if not e.writes} for f in order
                        if f in effects}
    written: dict[str, int] = {}
    read: dict[str, int] = {}  # the first place each is read (a byte offset)

    def note_read(name: str, node: Node) -> None:
        read[name] = min(read.get(name, node.start_byte), node.start_byte)
    atomic_roots: set[str] = set()
    pointer_params = {p.name for p in params if p.pointer} | pointer_locals(body, data)
    for n in _walk(body):
        if n.type in ("assignment_expression", "update_expression"):
            target = n.child_by_field_name("left") or n.child_by_field_name("argument")
            r = root_name(target, data) if target is not None else None
            if target is not None and target.type == "identifier" and r in pointer_params:
                continue  # `dst += offset`, `x += 512`: moves the pointer, no data moves
            if r:  # a write takes effect at the end of its expression (x[i] = x[i] + 1)
                written[r] = min(written.get(r, n.end_byte), n.end_byte)
                op = n.child_by_field_name("operator")
                if n.type == "update_expression" or (op is not None and _text(op, data) != "="):
                    note_read(r, n)
        elif n.type == "call_expression":
            f = n.child_by_field_name("function")
            fname = _text(f, data) if f is not None else ""
            args = [a for a in (n.child_by_field_name("arguments").named_children
                                if n.child_by_field_name("arguments") else [])]
            if fname in load_rewrites().atomics and args:
                r = root_name(args[0], data)
                if r:  # through a cast (`(int *) dst`) the buffer stays plain: a view of it
                    (info.atomic_views if view_cast(args[0], data) else atomic_roots).add(r)
                    written[r] = min(written.get(r, n.end_byte), n.end_byte)
            for r, e in call_effects(n, data, effects, writes_through):
                if e.writes:
                    written[r] = min(written.get(r, n.end_byte), n.end_byte)
                if e.read_first or e.reads and not e.writes:
                    note_read(r, n)
        elif n.type == "subscript_expression" or (n.type == "pointer_expression"
                                                  and _text(n, data).startswith("*")):
            r = root_name(n, data)
            p = n.parent
            stored = p is not None and p.type == "assignment_expression" and \
                p.child_by_field_name("left") == n and \
                _text(p.child_by_field_name("operator"), data) == "="
            addressed = p is not None and p.type == "pointer_expression" and \
                _text(p, data).startswith("&")
            if r and not stored and not addressed:
                note_read(r, n)
        elif n.type == "declaration" and "__shared__" in _text(n, data):
            _shared_decl(n, data, info)
    for r, end, writes in cub_data_effects(data[body.start_byte:body.end_byte].decode(
            "latin-1"), data.decode("latin-1")):  # CUB's Load and Store (cub.py)
        seen = written if writes else read
        seen[r] = min(seen.get(r, body.start_byte + end), body.start_byte + end)
    for cname in order:  # shared memory declared inside the functions the kernel calls
        for n in _walk(funcs[cname][0]):
            if n.type == "declaration" and "__shared__" in _text(n, data):
                _shared_decl(n, data, info)
    pnames = {p.name for p in params if p.pointer}
    views: dict[str, str] = {}
    for n in _walk(body):  # float* row = q + r * n: what row reads and writes is q's
        if n.type == "init_declarator":
            decl, value = n.child_by_field_name("declarator"), n.child_by_field_name("value")
            if decl is not None and decl.type == "pointer_declarator" and value is not None:
                r = root_name(value, data)
                r = views.get(r, r)
                if r in pnames:
                    ids = [x for x in _walk(decl) if x.type == "identifier"]
                    if ids:
                        views[_text(ids[0], data)] = r
    for alias, target in views.items():
        if alias in written:
            written[target] = min(written.get(target, written[alias]), written[alias])
        if alias in read:
            read[target] = min(read.get(target, read[alias]), read[alias])
    info.struct_params, info.struct_problems = structs, struct_problems
    for param, why in flat_problems.items():
        info.struct_problems[param] = why
        info.struct_params.pop(param, None)
    info.flat = flats
    body_text = _text(body, data)
    for p in params:  # `mask != nullptr`, `if (mask)`, `mask ? a : b`: it may be null
        n = r"(?<![\w.>])" + re.escape(p.name) + r"\b"  # the name, not a member `v.x`
        if p.pointer and re.search(
                rf"{n}\s*[!=]=\s*(?:nullptr|NULL|0)\b|\b(?:nullptr|NULL)\s*[!=]=\s*{n}|"
                rf"\bif\s*\(\s*!?\s*{n}\s*\)|{n}\s*\?|!\s*{n}\s*[^\[.(\s]|&&\s*{n}\s*[)&|]",
                body_text):
            info.nullable.append(p.name)
    for p in params:
        info.dtypes[p.name] = p.type
        if roles and p.name in roles:
            role = roles[p.name]
        elif p.name in info.struct_params:
            role = "in"
            info.dtypes[p.name] = "uint8_t"
        elif not p.pointer:
            role = "scalar"
        elif p.const or p.name not in written:
            role = "in"
        else:
            # read only after its first write (group_norm's `dst[j] *= scale` after `dst[j] =
            # ...`): the kernel reads what it wrote, so the caller gives no data for it
            role = "inout" if read.get(p.name, body.end_byte) < written[p.name] else "out"
            info.guessed.append(f"{p.name}: role {role} (non-const pointer, " + (
                "read and written)" if role == "inout" else "written before any read)"
                if p.name in read else "written)"))
        info.roles[p.name] = role
    for p in params:
        role = info.roles[p.name]
        if role in ("in", "inout", "scalar"):
            info.inputs.append(p.name)
        if role in ("out", "inout"):
            info.outputs.append(p.name if role == "out" else f"{p.name}_out")
            info.outputs_cuda.append(p.name)
        if role == "inout":
            info.first_write[p.name] = written.get(p.name, body.end_byte)
    inout = {p.name for p in params if info.roles[p.name] == "inout"}
    for n in _walk(body):  # local pointers that view an in-place argument
        if n.type == "declaration" and "*" in _text(n, data):
            for d in n.named_children:
                if d.type == "init_declarator":
                    decl, value = d.child_by_field_name("declarator"), \
                        d.child_by_field_name("value")
                    if decl is not None and decl.type == "pointer_declarator" and \
                            value is not None and root_name(value, data) in inout:
                        alias = _text([x for x in _walk(decl) if x.type == "identifier"][0],
                                      data)
                        info.aliases[alias] = root_name(value, data)
                        info.first_write[alias] = written.get(alias, body.end_byte)
    # in-place data handed to a function that writes through its pointer: that parameter
    # becomes a read pointer plus a write pointer, with its own first write inside the callee
    viewed = inout | set(info.aliases)
    for n in _walk(body):
        if n.type != "call_expression":
            continue
        f = n.child_by_field_name("function")
        fname = callee_name(f, data) if f is not None else ""
        args = n.child_by_field_name("arguments")
        for i in writes_through.get(fname, ()):
            if args is not None and i < len(args.named_children) and \
                    root_name(args.named_children[i], data) in viewed:
                info.split_params.setdefault(fname, set()).add(i)
    info.split_params = nested_splits(info.split_params, funcs, data, writes_through)
    refs = _mutable_params(callee_nodes, data, ("reference_declarator",))
    refs = {f: ix - temp_storage_params(callee_nodes[f][0], data) for f, ix in refs.items()}
    info.ref_params = {f: ix for f, ix in refs.items() if ix}
    info.split_params = {f: ix - info.ref_params.get(f, set())
                         for f, ix in info.split_params.items()}
    info.split_params = {f: ix for f, ix in info.split_params.items() if ix}
    for fname, idx in info.split_params.items():
        cfn = funcs[fname][0]
        cparams = _params(cfn, data)
        cbody = cfn.child_by_field_name("body")
        for i in idx:
            pname = cparams[i].name
            first = cbody.end_byte
            for m in _walk(cbody):
                if m.type in ("assignment_expression", "update_expression"):
                    t = m.child_by_field_name("left") or m.child_by_field_name("argument")
                    if t is not None and root_name(t, data) == pname:
                        first = min(first, m.end_byte)
            info.first_write[pname] = first
    wide = {p.name for p in params if p.pointer and p.type in WIDE_INTS}
    for r in atomic_roots - wide:  # Metal has no 64-bit atomic outputs: the call is a TODO
        if info.roles.get(r) in ("out", "inout"):
            info.atomic_names |= {p for p, role in info.roles.items() if role in ("out",)}
            info.atomic_names.add(r)
        elif r in info.shared:
            info.atomic_names.add(r)
        elif r in info.atomic_scalars:
            pass
    info.atomic_scalars = {s for s in info.atomic_scalars if s in atomic_roots}
    info.callees = [funcs[n][1] for n in order]
    info.local_names = set(funcs)
    info.known_names = declared_anywhere(root, data) | set(funcs) | defined_macros(src)
    info.macros = defined_macros(src)
    info.hoisted = _hoisted_shared(callee_nodes, data)
    info.attribute_params = _attribute_params(callee_nodes, order, data, info.hoisted)
    info.threadgroup_params = _threadgroup_params(body, _shared_pointers(body, info.shared,
                                                                         data), data, funcs)
    for fname, local in {(f, local) for f, local, _, _ in info.hoisted.values()}:
        for callee, ix in _threadgroup_params(funcs[fname][0], {local}, data, funcs).items():
            info.threadgroup_params.setdefault(callee, set()).update(ix)
    info.thread_params = thread_params([body, *(funcs[n][0] for n in order)], funcs, data)
    info.header_nodes = header_nodes(root, data, kouter, set(order), [funcs[n][1] for n in order],
                                      set(re.findall(r"[A-Za-z_]\w*", ",".join(spec_args))),
                                      known=info.known_names, where=where,
                                      bindings=_spelled_bindings(kouter, spec_args, data))
    return info


def _spelled_bindings(outer: Node, spec_args: list[str], data: bytes) -> dict[str, str]:
    """The kernel's template parameters -> its arguments as spelled."""
    if outer.type != "template_declaration":
        return {}
    names = [n for n, _, _ in _template_params(outer.child_by_field_name("parameters"), data)]
    return dict(zip(names, spec_args, strict=False))


_NAMED = ("struct_specifier", "class_specifier", "enum_specifier", "union_specifier",
          "namespace_definition", "namespace_alias_definition", "alias_declaration",
          "enumerator", "preproc_def", "preproc_function_def")
_TYPE_PARAMETERS = ("type_parameter_declaration", "variadic_type_parameter_declaration",
                    "optional_type_parameter_declaration")
_DECLARATORS = ("function_declarator", "init_declarator", "pointer_declarator",
                "reference_declarator", "array_declarator", "parameter_declaration",
                "optional_parameter_declaration", "variadic_parameter_declaration",
                "field_declaration", "declaration", "type_definition")
_NAME_NODES = ("identifier", "field_identifier", "type_identifier", "qualified_identifier")


def declared_anywhere(root: Node, data: bytes) -> set[str]:
    """Every name declared anywhere under ``root``: types, namespaces, aliases, enumerators,
    macros, template parameters, functions, variables, parameters and fields."""
    out = set()
    for n in _walk(root):
        if n.type in _NAMED:
            name = n.child_by_field_name("name")
            if name is not None and name.type == "template_type":
                name = name.child_by_field_name("name")
            if name is not None:
                out.add(_text(name, data))
        elif n.type in _TYPE_PARAMETERS:
            out |= {_text(c, data) for c in n.named_children if c.type == "type_identifier"}
        elif n.type in _DECLARATORS:
            d = n.child_by_field_name("declarator")
            while d is not None and d.type not in _NAME_NODES:  # through `*`, `&`, `[]`, `()`
                d = d.child_by_field_name("declarator") or next(
                    (c for c in d.named_children
                     if c.type in _NAME_NODES or c.type.endswith("declarator")), None)
            if d is not None:
                out.add(_text(d, data).split("::")[-1])
    return out


def _shared_decl(n: Node, data: bytes, info: KernelInfo) -> None:
    for d in n.named_children:
        if d.type in ("array_declarator", "identifier", "init_declarator"):
            ids = [x for x in _walk(d) if x.type == "identifier"]
            if not ids:
                continue
            name = _text(ids[0], data)
            if "extern" in _text(n, data):
                ty = " ".join(_text(c, data) for c in n.named_children
                              if c.type in ("primitive_type", "type_identifier",
                                            "sized_type_specifier"))
                info.extern_shared[name] = ty
            info.shared.append(name)
            if d.type == "identifier":
                info.atomic_scalars.add(name)


def _hoisted_shared(callees: dict[str, tuple[Node, Node]],
                    data: bytes) -> dict[str, tuple[str, str, str, str]]:
    """``__shared__`` arrays declared inside helper functions (MSL declares threadgroup
    memory only in a kernel): kernel-scope name -> (helper, local name, element type, the
    array's dimensions as written). One per block, as CUDA's static shared variable is; a
    template helper's (whose type or size may be a template parameter) is left out."""
    out = {}
    for fname, (fn, outer) in callees.items():
        if outer.type == "template_declaration":
            continue
        for n in _walk(fn.child_by_field_name("body") or fn):
            if n.type != "declaration" or "__shared__" not in _text(n, data) or \
                    "extern" in _text(n, data):
                continue
            ty = " ".join(_text(c, data) for c in n.named_children
                          if c.type in ("primitive_type", "type_identifier",
                                        "sized_type_specifier"))
            for d in n.named_children:
                if d.type != "array_declarator":
                    continue
                ids = [x for x in _walk(d) if x.type == "identifier"]
                if ids and "=" not in _text(d, data):
                    local = _text(ids[0], data)
                    dims = _text(d, data)[len(local):].strip()
                    out[f"kp_{fname}_{local}"] = (fname, local, ty, dims)
    return out


def _attribute_params(callees: dict[str, tuple[Node, Node]], order: list[str],
                      data: bytes, hoisted: dict | None = None) -> dict[str, list[str]]:
    direct: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}
    for name, (fn, _) in callees.items():
        uses = {k for k, (f, *_) in (hoisted or {}).items() if f == name}
        if needs_thread_index(_text(fn, data), data.decode(errors="replace")):
            uses.add(CUB_THREAD_INDEX)  # a CUB collective made here (cub.py)
        cs = set()
        for n in _walk(fn):
            t = _text(n, data) if n.child_count == 0 else ""
            rw = load_rewrites().idents.get(t)
            if rw is not None and rw.rule.startswith("launch.") and rw.to in ATTRIBUTE_VALUES:
                uses.add(rw.to)
            if n.type == "call_expression":
                f = n.child_by_field_name("function")
                args = n.child_by_field_name("arguments")
                fname = _text(f, data) if f is not None else ""
                nargs = len(args.named_children) if args is not None else 0
                mapped = load_rewrites().calls.get((fname, nargs))
                if mapped is not None:  # a mapping that reads a lane id (a width shuffle)
                    uses |= {a for a in ATTRIBUTE_VALUES if re.search(rf"\b{a}\b", mapped.to)}
                cs.add(fname.split("<")[0])
        direct[name], calls[name] = uses, cs
    total: dict[str, set[str]] = {}
    for name in order:  # callees first, so their sets are complete
        total[name] = set(direct[name])
        for c in calls[name]:
            total[name] |= total.get(c, set())
    return {n: sorted(a) for n, a in total.items() if a}


def _shared_pointers(body: Node, shared: list[str], data: bytes) -> set[str]:
    """``shared`` and the local pointers into it: ``float * buf = smem;``, transitively."""
    out, more = set(shared), True
    while more:
        more = False
        for n in _walk(body):
            decl = n.child_by_field_name("declarator") if n.type == "init_declarator" else None
            if decl is not None and decl.type == "pointer_declarator" and \
                    root_name(n.child_by_field_name("value"), data) in out:
                name = next(x for x in _walk(decl) if x.type == "identifier")
                more = more or _text(name, data) not in out
                out.add(_text(name, data))
    return out


def _threadgroup_params(body: Node, shared: set[str], data: bytes, funcs) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for n in _walk(body):
        if n.type == "call_expression":
            f = n.child_by_field_name("function")
            args = n.child_by_field_name("arguments")
            fname = _text(f, data).split("<")[0] if f is not None else ""
            if fname in funcs and args is not None:
                for i, a in enumerate(args.named_children):
                    if root_name(a, data) in shared:
                        out.setdefault(fname, set()).add(i)
    return out
