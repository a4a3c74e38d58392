"""The offline translator: a CUDA kernel (tree-sitter AST) -> an MLX ``metal_kernel`` body,
header and launch mapping, driven by the knowledge base's rules (kb/rules/rewrites.toml for
spellings, the concept rules for what is left as ``KPORT-TODO``).

``translate_kernel`` returns a :class:`Translation`: the Metal source, the MLX argument lists
(inputs by CUDA name; an ``inout`` argument ``x`` becomes input ``x`` and output ``x_out``),
template arguments, grid and threadgroup (MLX counts threads: grid = blocks * block), and the
coverage: constructs mapped, constructs left as TODO with their rule and line.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field

from agent.translate import cub, init_lists, namespaces, wmma
from agent.translate import names as msl_names
from agent.translate.analyze import (
    C_TYPE_NAMES,
    TYPE_DTYPES,
    VECTOR_TYPE,
    KernelInfo,
    TranslateError,
    analyze_kernel,
)
from agent.translate.atomics import WIDE_INTS
from agent.translate.emit import _SCALAR_KIND, ATTRIBUTES, Context, Emitter
from agent.translate.folding import constexpr_values
from agent.translate.helpers import HELPERS
from kb.concepts import load_rules
from kb.rewrites import load_rewrites
from kb.rules_match import _marker_tokens
from runners import ptx

# Besides the rewrite table's spellings, a rule marker counts as a CUDA construct when it is
# one of CUDA's own names (intrinsics, runtime API, atomics, builtins, tensor-core and
# cooperative-groups API, fp64 types) rather than a name user code picks (lane_id, smem).
_CUDA_NAMES = {"wmma", "nvcuda", "cooperative_groups", "this_thread_block", "tiled_partition",
               "thread_block_tile", "this_grid", "grid_group", "coalesced_threads",
               "coalesced_group", "thread_block", "printf", "assert", "clock", "clock64",
               "double", "dim3", "warpSize", "threadIdx", "blockIdx", "blockDim", "gridDim"}


def _is_cuda_name(tok: str) -> bool:
    return tok.startswith(("__", "cuda", "atomic")) or tok in _CUDA_NAMES


@dataclass(frozen=True)
class Todo:
    rule: str
    construct: str
    line: int
    file: str = ""  # the file of ``line`` when the source was read from a tree (``origin``)
    metal: str = ""  # what the rule says the Metal form is


@dataclass
class Translation:
    kernel: str
    body: str
    header: str
    inputs: list[str]
    outputs: list[str]
    roles: dict[str, str]
    dtypes: dict[str, str]  # CUDA argument -> element type as written (float, half, int ...)
    template: dict[str, int | str]
    grid: list[str]
    threadgroup: list[str]
    atomic_outputs: bool = False
    init_value: float | None = None
    todos: list[Todo] = field(default_factory=list)
    mapped: Counter = field(default_factory=Counter)
    unmapped: Counter = field(default_factory=Counter)
    rules_used: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    guessed: list[str] = field(default_factory=list)
    # struct parameters passed as their bytes: name -> (C type, fields; runners/structs.py)
    structs: dict[str, tuple[str, list[dict]]] = field(default_factory=dict)
    nullable: list[str] = field(default_factory=list)  # inputs that may be null (KP_HAS_<name>)
    struct_problems: dict[str, str] = field(default_factory=dict)  # why a struct cannot pass
    # a struct's pointer fields made buffers (pointer_fields.py): buffer -> "STRUCT.FIELD"
    flat: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)  # scalar -> its C++ default value
    # an argument whose CUDA name Metal cannot take -> its name in the port (names.py)
    names: dict[str, str] = field(default_factory=dict)

    @property
    def coverage(self) -> float:
        total = sum(self.mapped.values()) + sum(self.unmapped.values())
        return 1.0 if total == 0 else sum(self.mapped.values()) / total

    def metal_source(self) -> str:
        """Header and body as one readable file (what ``kernel.metal`` holds)."""
        head = f"// header\n{self.header.strip()}\n\n" if self.header.strip() else ""
        return f"{head}// body of the metal_kernel `{self.kernel}`\n{self.body.strip()}\n"


@functools.cache
def constructs() -> dict[str, str]:
    """CUDA's own spellings among the concept rules' markers -> the first rule naming each
    (what coverage and TODO notes count, with the rewrite table's spellings). Built once per
    process; callers copy before changing it."""
    out: dict[str, str] = {}
    for rule in load_rules():
        for marker in rule.markers:
            toks = _marker_tokens(marker.split(" && ")[0])
            first = toks[0] if toks else ""
            if _is_cuda_name(first):
                out.setdefault(first, rule.id)
    return out


def _program_scope_constant(node, text: str) -> bool:
    """Whether a file-scope declaration is read-only data (const/constexpr) that still lacks
    Metal's `constant`; a mutable global stays as it is (and is refused: no mutable
    program-scope storage in Metal)."""
    declarator = node.child_by_field_name("declarator")
    if node.type != "declaration" or declarator is None or declarator.type in (
            "function_declarator",):
        return False
    words = set(re.findall(r"\w+", text.split("=")[0]))
    return "constant" not in words and bool(words & {"const", "constexpr"})


def _element(ctype: str, table) -> str:
    """A pointer parameter's element type in Metal's spelling (``__half`` -> ``half``)."""
    words = [w for w in ctype.replace("*", " ").split() if w not in ("const", "__restrict__",
                                                                     "volatile")]
    name = " ".join(words)
    rewrite = table.idents.get(name)
    return rewrite.to if rewrite else name


def translate_kernel(src: str, kernel: str, *, roles: dict[str, str] | None = None,
                     grid: list | None = None, block: list | None = None,
                     shared_mem: str | int = 0, where: str = "<source>",
                     strict: bool = True,
                     origin: list[tuple[str, int]] | None = None) -> Translation:
    """Translate ``kernel`` (a name, optionally with template arguments: ``softmax<256>``) of
    the CUDA source ``src``. ``roles`` (in/out/inout/scalar by parameter) default to what the
    code implies; ``grid``/``block`` are the CUDA launch (expressions over size symbols).
    ``strict=False`` leaves template parameters without values symbolic (for coverage counts).
    ``origin`` (runners.cuda_sim.reading.SourceView's) gives the file and line each line of
    ``src`` came from: each TODO then names them."""
    src = ptx.lower_source(src).source  # inline PTX as the CUDA it means (lines kept)
    src = init_lists.fold(src)  # std::max({a, b}): MSL has no initializer_list (lines kept)
    renames = msl_names.plan(src)  # `kernel`, `device` ...: names Metal keeps for itself
    if renames:
        src = msl_names.rename(src, renames)
        kernel = msl_names.rename_spec(kernel, renames)
        roles = {renames.get(k, k): v for k, v in roles.items()} if roles else roles
    info = analyze_kernel(src, kernel, where, roles, strict, flatten=True, origin=origin)
    table = load_rewrites()
    ctx = Context(table=table, constructs=constructs())
    ctx.device_ptrs = {p.name for p in info.params if p.pointer}
    ctx.shared = set(info.shared)
    ctx.atomic = set(info.atomic_names)
    ctx.atomic_scalars = set(info.atomic_scalars)
    ctx.inout = dict(info.first_write)
    ctx.aliases = dict(info.aliases)
    ctx.split_params = {fn: set(ix) for fn, ix in info.split_params.items()}
    ctx.ref_params = {fn: set(ix) for fn, ix in info.ref_params.items()}
    ctx.readonly = {p.name for p in info.params
                    if p.pointer and info.roles.get(p.name) in ("in", "scalar")}
    ctx.input_kinds = {p.name: _SCALAR_KIND[kind] for p in info.params
                       if p.pointer and info.roles.get(p.name) in ("in", "inout", "scalar")
                       and (kind := _element(p.type, table)) in _SCALAR_KIND}
    ctx.constructs = {k: v for k, v in ctx.constructs.items()
                      if k not in info.local_names and k not in info.macros}
    ctx.macros = set(info.macros)
    ctx.known = info.known_names | set(TYPE_DTYPES) | C_TYPE_NAMES
    ctx.extra_params = {fn: list(attrs) for fn, attrs in info.attribute_params.items()}
    ctx.param_types = {p: f"threadgroup {ty}*" for p, (_, _, ty, _) in info.hoisted.items()}
    ctx.hoisted_locals = {(f, local): p for p, (f, local, _, _) in info.hoisted.items()}
    ctx.tg_params = {fn: set(ix) for fn, ix in info.threadgroup_params.items()}
    ctx.thread_params = {fn: set(ix) for fn, ix in info.thread_params.items()}
    ctx.read_params = {fn: set(ix) for fn, ix in info.read_params.items()}
    ctx.wide = {p.name for p in info.params if p.pointer and p.type in WIDE_INTS}
    root = info.kernel_node
    while root.parent is not None:
        root = root.parent
    ctx.file_constants = constexpr_values(root, info.data, {})
    ctx.kernel_constants = constexpr_values(info.kernel_node, info.data, ctx.file_constants | {
        name: value for name, value in info.template if isinstance(value, int)})
    if info.extern_shared:
        ctx.smem_sizes = {name: f"KP_SMEM_BYTES / sizeof({ty})"
                          for name, ty in info.extern_shared.items()}
    data = info.data
    header_parts = []
    for node in info.header_nodes:
        text = Emitter(data, ctx, in_kernel=False).emit(node).strip()
        if node.type in ("struct_specifier", "enum_specifier") and not text.endswith(";"):
            text += ";"
        if _program_scope_constant(node, text):
            # MSL keeps program-scope data only in the constant address space: a file-scope
            # `constexpr int K = 8;` is refused by Apple's compiler without it
            text = "constant " + text
            ctx.rules_used.add("memory.constant_table")
        header_parts.append((node, text))
    # each item inside its namespaces; the kernel, at file scope in MLX, sees its own
    header_parts = [p.rstrip("\n") for p in namespaces.wrapped(header_parts, data)]
    header_parts.append(namespaces.kernel_scope(info.kernel_outer, data).rstrip("\n"))
    body_node = info.kernel_node.child_by_field_name("body")
    inner = Emitter(data, ctx, in_kernel=True)
    kids = body_node.children
    parts, pos = [], kids[0].end_byte
    for c in kids[1:-1]:
        parts.append(data[pos:c.start_byte].decode(errors="replace"))
        parts.append(inner.emit(c))
        pos = c.end_byte
    parts.append(data[pos:kids[-1].start_byte].decode(errors="replace"))
    body = "".join(parts)
    # What MLX cannot pass as the kernel has it is rebuilt at the body's start: a copy in an
    # outer block, the original name (shadowing the input) in an inner one. A struct's bytes
    # arrive as a uint8 buffer named like it; a pointer the kernel tests against null arrives
    # as an array (a dummy when null) plus the template bool KP_HAS_<name>.
    nullable = [n for n in info.nullable if info.roles.get(n) == "in"]
    # helpers' __shared__ arrays live in the kernel (MSL declares threadgroup memory there)
    body = "".join(f"threadgroup {ty} {p}{dims};\n"
                   for p, (_, _, ty, dims) in info.hoisted.items()) + body
    head = "".join(f"const {_packed(ty)} {name}_kport = *reinterpret_cast<const device "
                   f"{_packed(ty)}*>({name});\n" for name, (ty, _) in info.struct_params.items())
    head += "".join(f"auto {name}_kport = {name};\n" for name in nullable)
    inner = "".join(f"const {ty} {name} = {ty}({name}_kport);\n" if VECTOR_TYPE.fullmatch(ty)
                    else f"const {ty} {name} = {name}_kport;\n"
                    for name, (ty, _) in info.struct_params.items())
    inner += "".join(f"decltype({name}_kport) {name} = KP_HAS_{name} ? {name}_kport : nullptr;\n"
                     for name in nullable)
    if head:
        body = f"{head}{{\n{inner}{body}\n}}\n"
    if info.struct_params:
        ctx.rules_used.add("types.struct_param")
    if nullable:
        ctx.rules_used.add("memory.nullable_pointer")
    if info.flat:
        ctx.rules_used.add("types.struct_pointer_field")
    _signature_todos(info, ctx)
    body, header_parts = cub.apply(src, body, header_parts, ctx)
    body, header_parts = wmma.apply(src, body, header_parts, ctx)
    header_parts = [HELPERS[h] for h in sorted(ctx.helpers)] + header_parts
    rules = {r.id: r for r in load_rules()}
    # MLX pastes the header verbatim before `template <...>` / `[[kernel]]`: without a final
    # newline a last `#define` would swallow the signature's first line
    # A template argument MLX cannot pass (it takes ints, bools and dtypes: not a function
    # such as unary_op_kernel<op_gelu, float>'s, nor an enum constant or a struct type) is
    # bound by a macro after the header, where only the kernel's signature and body see it.
    template = dict(info.template) | {f"KP_HAS_{n}": True for n in info.nullable
                                      if info.roles.get(n) == "in"}
    for name, value in list(template.items()):
        if isinstance(value, str) and value not in TYPE_DTYPES.values() and \
                re.search(r"[A-Za-z_]", value):
            header_parts.append(f"#define {name} {cub.spelled(value, ctx)}  // template "
                                f"argument {name}")
            del template[name]
    header = namespaces.declared_only("".join(f"{p}\n" for p in header_parts if p))
    tr = Translation(
        kernel=info.name, body=_dedent(body), header=header,
        inputs=info.inputs, outputs=info.outputs, roles=info.roles, dtypes=info.dtypes,
        template=template,
        grid=[f"({g}) * ({b})" for g, b in zip(_dims(grid), _dims(block), strict=True)]
        if grid is not None and block is not None else [],
        threadgroup=[str(b) for b in _dims(block)] if block is not None else [],
        atomic_outputs=bool(info.atomic_names & set(info.outputs_cuda)),
        todos=[Todo(r, c, *_origin(line, origin), metal=rules[r].metal if r in rules else "")
               for r, c, line in ctx.todos],
        mapped=ctx.mapped, unmapped=ctx.todo, rules_used=sorted(ctx.rules_used),
        notes=list(info.notes), guessed=list(info.guessed), structs=dict(info.struct_params),
        nullable=[n for n in info.nullable if info.roles.get(n) == "in"],
        struct_problems=dict(info.struct_problems),
        flat={f.name: f"{f.param}.{f.path}" for f in info.flat},
        defaults={p.name: p.default for p in info.params if p.default and not p.pointer})
    if tr.atomic_outputs:
        tr.init_value = 0.0
        tr.notes.append("outputs are atomic (MLX atomic_outputs=True) and start at 0 "
                        "(init_value=0, as a cudaMemset before the launch would)")
    elif viewed := sorted(info.atomic_views & set(info.outputs_cuda)):
        tr.init_value = 0.0
        tr.notes.append(f"atomics reach {', '.join(viewed)} through a cast: the buffer stays "
                        "plain, viewed as atomic where they do (atomics.narrow_view); outputs "
                        "start at 0 (init_value=0, as a cudaMemset before the launch would)")
    if info.extern_shared:
        tr.template["KP_SMEM_BYTES"] = str(shared_mem)
    msl_names.restore(tr, renames)
    return tr


def _packed(ty: str) -> str:
    """How the port reads a by-value parameter's bytes: a CUDA vector as Metal's packed_
    vector (CUDA's layout), a struct as itself."""
    return f"packed_{ty}" if VECTOR_TYPE.fullmatch(ty) else ty


def _signature_todos(info: KernelInfo, ctx: Context) -> None:
    """What the signature asks that no translation gives, each a counted TODO at the kernel:
    a struct parameter by value (MLX passes arrays, not structs) and a kernel whose outputs
    kport cannot see (it writes through something role analysis does not follow)."""
    line = info.kernel_node.start_point[0] + 1
    bound = {name for name, _ in info.template}
    for p in info.params:
        spelled = " ".join(p.type.replace("const", " ").split())
        if not p.pointer and spelled not in TYPE_DTYPES and spelled not in C_TYPE_NAMES \
                and spelled not in bound and p.name not in info.struct_params \
                and not spelled.startswith("enum "):
            why = info.struct_problems.get(p.name, "")
            ctx.todo[f"struct parameter {p.name}"] += 1
            ctx.todos.append(("types.struct_param", f"struct parameter {p.name} ({spelled})"
                              + (f": {why}" if why else ""), line))
    if not info.outputs:
        ctx.todo["no outputs"] += 1
        ctx.todos.append(("memory.kernel_outputs", "no outputs (no written pointer found)",
                          line))


def cuda_closure(src: str, kernel: str, *, where: str = "<source>",
                 origin: list[tuple[str, int]] | None = None) -> str:
    """The CUDA code ``kernel`` needs of ``src``: the file-scope items it uses (macros, types,
    constants, the device functions it calls, what those use) and the kernel, verbatim and in
    file order, each after a ``#line`` naming where it was written (``origin`` as in
    translate_kernel). A self-contained file that compiles as the kernel does in its tree,
    without the host code around it and the host libraries that code needs. Qualifier-only
    macros (``GGML_RESTRICT``) are left out, as the translator reads them."""
    info = analyze_kernel(src, kernel, where, strict=False, origin=origin)
    parts = []
    for node in sorted([*info.header_nodes, info.kernel_outer], key=lambda n: n.start_byte):
        line, file = _origin(node.start_point[0] + 1, origin)
        text = info.data[node.start_byte:node.end_byte].decode(errors="replace")
        if node.type in ("struct_specifier", "enum_specifier", "class_specifier"):
            text += ";"
        parts.append((node, f'#line {line} "{file or where}"\n{text}\n'))
    # each item inside its namespaces; the launch, at file scope, finds the kernel
    return "".join(namespaces.wrapped(parts, info.data)) + namespaces.kernel_scope(
        info.kernel_outer, info.data)


def _origin(line: int, origin: list[tuple[str, int]] | None) -> tuple[int, str]:
    """(line, file) of ``src``'s line ``line`` in the file it came from."""
    if origin and 1 <= line <= len(origin):
        return origin[line - 1][1], origin[line - 1][0]
    return line, ""


def _dims(v: list | None) -> list:
    v = list(v or [])
    return (v + [1, 1, 1])[:3]


def _dedent(text: str) -> str:
    lines = text.strip("\n").splitlines()
    indents = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(ln[cut:] for ln in lines) + "\n"


__all__ = ["ATTRIBUTES", "KernelInfo", "Todo", "Translation", "TranslateError",
           "translate_kernel"]
