"""Launches of a kernel in its file's own host code: ``kernel<<<grid, block, smem, stream>>>(...)``
read as size expressions over the parameters of the host function that makes the launch.

llama.cpp's ``clamp_cuda(x, dst, min, max, k, stream)`` computes ``num_blocks = (k +
CUDA_CLAMP_BLOCK_SIZE - 1) / CUDA_CLAMP_BLOCK_SIZE`` and launches ``op_clamp_kernel<<<num_blocks,
CUDA_CLAMP_BLOCK_SIZE, 0, stream>>>(x, dst, min, max, k)``: the launch is ``grid = (k + 256 - 1)
// 256``, ``block = 256`` over the size ``k``, and the kernel's ``k`` is the host's ``k``. Local
constants of the host function (``const int``, ``dim3 b(x, y, z)``) and the file's object-like
macros are substituted; C's integer ``/`` becomes ``//`` and casts are dropped. A launch whose
configuration needs anything else (a runtime query, a ternary, a member of a struct) is not
used: ``problems`` says why, and the user gives --grid/--block.

Two spellings of a launch are read: ``kernel<<<...>>>(args)`` and a call of a launch helper
that takes the kernel first and a launch-parameters value second, as llama.cpp's
``ggml_cuda_kernel_launch(kernel<op, T>, launch_params, args...)`` does; the helper must be
defined in the source and launch its first parameter with ``<<<``, and the launch-parameters
value must be a local built from a constructor call whose first three arguments are grid,
block and dynamic shared memory (read positionally: the helper's own body is not followed).
Each launch keeps its explicit template arguments, so that ``norm_f32<1024>`` takes the
launch of ``norm_f32<1024>``, not of ``norm_f32<WARP_SIZE>`` (``instantiations``). A launch
through a local pointer to the kernel (``auto k = &kernel<Ktraits>; k<<<...>>>``) is read
too; the host's template parameters bound from the user's instantiation, its traits
constants compiled and a struct parameter's fields named by sizes: agent/host_consts.py. A
call of the file's own function of one integer (``next_power_of_2(ncols)``) is the size
function it computes, found by running it (agent/host_consts.HostCompiler.size_function).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import numpy as np

from agent.host_consts import (
    FIELD_ACCESS,
    HostCompiler,
    HostTerms,
    bind_template,
    host_terms,
)
from agent.translate.analyze import (
    PARAMETER_NODES,
    TYPE_DTYPES,
    _text,
    _walk,
)
from agent.translate.macros import (
    blank_qualifier_macros,
    expand_unbalanced_macros,
    split_template_args,
    template_parts,
)
from runners.dtypes import DTYPES
from runners.sizeexpr import FUNCTIONS, SizeExprError, evaluate
from runners.sourcetree import parse

_OBJECT_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n\\]+)$", re.M)
_CAST = re.compile(r"\(\s*(?:const\s+)?(?:unsigned\s+)?(?:int|long|long long|size_t|int64_t|"
                   r"int32_t|uint32_t|uint64_t|unsigned|dim3)\s*\)")
_STATIC_CAST = re.compile(r"\bstatic_cast\s*<[^<>]*>")
_IDENT = re.compile(r"[A-Za-z_]\w*")
# <stdint.h>'s and <climits>'s limits, which launches clamp grids with (system headers are
# not read: their macros are not in the source)
_C_LIMITS = {"UINT8_MAX": "255", "UINT16_MAX": "65535", "INT16_MAX": "32767",
             "INT32_MAX": "2147483647", "UINT32_MAX": "4294967295", "INT_MAX": "2147483647",
             "UINT_MAX": "4294967295", "SHRT_MAX": "32767", "USHRT_MAX": "65535"}
# the warp size a host queries (cudaDeviceProp::warpSize, ggml's device info.warp_size): 32,
# the oracle being CUDA on NVIDIA (HIP's 64-lane wavefronts are not modelled)
_WARP_SIZE = re.compile(r"\b[A-Za-z_]\w*\s*(?:\.|->)\s*(?:warp_size|warpSize)\b")
# a file-scope integer constant (``constexpr int granularity = 16;`` in a namespace): a launch's
# ``td_data::granularity`` reads it (the namespace is dropped: the first definition wins)
_CONSTEXPR = re.compile(r"(?:^|(?<=[{;]))[ \t]*(?:static\s+)?constexpr\s+(?:const\s+)?"
                        r"(?:unsigned\s+)?(?:int|long|size_t|int64_t|int32_t|uint32_t|uint64_t|unsigned)\s+"
                        r"([A-Za-z_]\w*)\s*=\s*([^;{}\n]+);", re.M)
_QUALIFIED = re.compile(r"\b(?:[A-Za-z_]\w*::)+(?=[A-Za-z_]\w*)")
_NOT_MEMBER = re.compile(r"(?<![.\w])(?<!->)[A-Za-z_]\w*")
# sizeof of the scalar types a launch sizes shared memory by (bytes of their MLX dtypes), and
# of CUDA's vector types
_BYTES = {name: np.dtype(DTYPES[dtype][0]).itemsize for name, dtype in TYPE_DTYPES.items()}
_BYTES |= {f"{base}{n}": size * (4 if n == 3 else n) for base, size in (
    ("float", 4), ("int", 4), ("uint", 4), ("short", 2), ("ushort", 2), ("char", 1),
    ("uchar", 1), ("double", 8), ("long", 8), ("ulong", 8)) for n in (2, 3, 4)}
_BYTES |= {"half2": 4, "__half2": 4, "nv_bfloat162": 4, "__nv_bfloat162": 4, "size_t": 8}
_SIZEOF = re.compile(r"\bsizeof\s*\(\s*(" + "|".join(
    re.escape(n).replace("\\ ", r"\s+") for n in sorted(_BYTES, key=len, reverse=True))
    + r")\s*\)")


@dataclass
class HostLaunch:
    """One launch of the kernel: where it is, the host function's parameters, and the
    configuration and arguments as size expressions over them (None where not expressible)."""

    host: str
    line: int
    params: list[str]
    grid: list[str] | None = None
    block: list[str] | None = None
    shared_mem: str | None = "0"
    args: list[str | None] = field(default_factory=list)
    arg_texts: list[str] = field(default_factory=list)  # each argument as written
    problems: list[str] = field(default_factory=list)
    # the explicit template arguments of the launched kernel (macros and constants folded),
    # None where the host function's own template parameter stands (any value matches);
    # None for a launch without ``<...>`` (arguments deduced: any instantiation matches)
    template_args: list[str | None] | None = None
    # a CUDA vector argument's components as size expressions, by argument index
    vectors: dict[int, list[str]] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return self.grid is not None and self.block is not None and self.shared_mem is not None


def find_launches(src: str, kernel: str, given=(), sizes=(),
                  constants: HostCompiler | None = None) -> list[HostLaunch]:
    """Every launch of ``kernel`` (its name without template arguments) in the host functions
    of ``src``, in file order: ``<<<...>>>`` launches (of the kernel or of a local pointer to
    it) and calls of launch helpers. ``given``: the kernel's template arguments, which bind
    the host's own template parameters where the launch passes them (agent/host_consts.py;
    ``sizeof(T)`` in an argument is then its bytes). ``sizes``: the size names the user gave;
    one that names a host local, or a field of a host parameter (``params.batch``), stands for
    it (llama.cpp's hosts take tensors and compute ``total = T_out * OC`` from them: ``--size
    total=486`` says it). ``constants``: the values of C++ constant expressions only the
    compiler knows (``Ktraits::kSmemSize``) and the size functions the file's helpers of one
    integer compute (``next_power_of_2``: agent/host_consts.HostCompiler); without it such a
    launch part is unread."""
    data = blank_qualifier_macros(expand_unbalanced_macros(src, launches=True)).encode()
    root = parse(data, "cuda")
    macros = _C_LIMITS | {m[1]: m[2].split("//")[0].strip() for m in _OBJECT_MACRO.finditer(src)}
    macros |= {m[1]: m[2].strip() for m in _CONSTEXPR.finditer(src) if m[1] not in macros}
    name = _bare(kernel)
    helpers = _launch_helpers(root, data)
    found = []
    for fn in (n for n in _walk(root) if n.type == "function_definition"):
        for call in (n for n in _walk(fn) if n.type == "call_expression"):
            config = next((c for c in call.children if c.type == "kernel_call_syntax"), None)
            callee = call.child_by_field_name("function")
            if callee is None:
                continue
            text = _text(callee, data)
            if config is not None and _bare(text) != name:
                text = _kernel_pointer(fn, call, text, name, data)  # `auto k = &kernel<..>;`
            if config is not None and text is not None:
                found.append(_launch(fn, call, config, text, data, macros, given, sizes,
                                     constants))
            elif config is None and _bare(_text(callee, data)) in helpers:
                args = call.child_by_field_name("arguments")
                parts = [a for a in (args.named_children if args else [])
                         if a.type != "comment"]
                if len(parts) >= 2 and _bare(_text(parts[0], data)) == name:
                    found.append(_helper_launch(fn, call, parts, data, macros, given,
                                                sizes, constants))
    return found


def _bare(callee: str) -> str:
    """A kernel's name without template arguments or namespace (``vllm::k<float>``: k)."""
    return callee.split("<")[0].split("::")[-1].strip()


def instantiations(src: str, kernel: str, launches: list[HostLaunch] | None = None) -> list[str]:
    """The instantiations of ``kernel`` the host code of ``src`` launches (``launches``: its
    find_launches, when the caller has them), as a user would name them (``concat_cont<T,
    1>``: ``T`` is the host function's own parameter)."""
    name = kernel.split("<")[0].strip()
    out = []
    for launch in find_launches(src, kernel) if launches is None else launches:
        if launch.template_args is None:
            text = f"{name} (template arguments deduced from its arguments)"
        else:
            text = f"{name}<{', '.join(a or '?' for a in launch.template_args)}>"
        if text not in out:
            out.append(text)
    return out


def matches(launch: HostLaunch, given: list[str]) -> bool:
    """Whether ``launch`` launches the instantiation of template arguments ``given`` (a
    prefix; constants folded as the launch's are)."""
    if launch.template_args is None:
        return True
    for mine, theirs in zip(given, launch.template_args, strict=False):
        if theirs is not None and _same_arg(mine, theirs) is False:
            return False
    return True


def _same_arg(a: str, b: str) -> bool:
    fold = {"unsigned int": "unsigned", "uint": "unsigned"}
    a, b = (" ".join(x.split()) for x in (a, b))
    a, b = fold.get(a, a), fold.get(b, b)
    if a == b:
        return True
    try:
        return _const(a) == _const(b)
    except ValueError:
        return False


def _const(text: str):
    """``text`` folded to a number or bool (kport's size evaluator with no sizes, C's integer
    ``/``); ValueError when it is not constant."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    try:
        return evaluate(re.sub(r"(?<![/])/(?![/])", "//", text), {})
    except SizeExprError:
        raise ValueError(text) from None


def _launch_helpers(root, data: bytes) -> set[str]:
    """Functions of the source that launch their first parameter with ``<<<``: launch
    helpers such as ``ggml_cuda_kernel_launch(kernel, params, args...)``."""
    out = set()
    for fn in (n for n in _walk(root) if n.type == "function_definition"):
        name, params, _ = _host_params(fn, data)
        if params and any(
                call.child_by_field_name("function") is not None
                and _text(call.child_by_field_name("function"), data).strip() == params[0]
                and any(c.type == "kernel_call_syntax" for c in call.children)
                for call in _walk(fn) if call.type == "call_expression"):
            out.add(name)
    return out


def _host_params(fn, data: bytes) -> tuple[str, list[str], set[str]]:
    """(name, parameter names, template parameter names) of host function ``fn``."""
    declarator = fn.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    host = _text(declarator.child_by_field_name("declarator"), data) \
        if declarator is not None else "?"
    params = [_text(name, data) for _, name in _param_names(fn, data)]
    tparams = set()
    if fn.parent is not None and fn.parent.type == "template_declaration":
        plist = fn.parent.child_by_field_name("parameters")
        for p in plist.named_children if plist else []:
            ids = [x for x in _walk(p) if x.type in ("identifier", "type_identifier")]
            if ids:
                tparams.add(_text(ids[-1], data))
    if re.search(r"\w*DISPATCH\w*\s*\(", _text(fn, data)):  # PyTorch's AT_DISPATCH_* (and
        tparams.add("scalar_t")  # wrappers: VLLM_DISPATCH_*) choose `scalar_t` at run time
    return host, params, tparams


def _template_args(callee_text: str, tparams: set[str], local: dict,
                   macros: dict[str, str], params=()) -> list[str | None] | None:
    if not callee_text.strip().endswith(">"):
        return None  # deduced from the arguments
    out: list[str | None] = []
    for arg in template_parts(callee_text)[1]:
        if any(t in tparams or t in params for t in _IDENT.findall(arg)):
            out.append(None)  # the host's own template parameter or a runtime value
            continue
        folded = _size_expr(arg, local, macros, [], [])
        if folded is None and any(t in local for t in _IDENT.findall(arg)):
            out.append(None)  # a local the launch computes at run time
            continue
        try:
            value = _const(folded) if folded is not None else None
        except ValueError:
            value = None
        out.append(arg if value is None else
                   ("true" if value else "false") if isinstance(value, bool) else str(value))
    return out


def _type_sizes(callee_text: str, template_args, given) -> dict[str, int]:
    """Bytes of the host's own type parameters the launch passes where ``given`` names a
    scalar type (``tri_kernel<T, true, 0>`` launched as ``tri_kernel<float, ...>``: T is 4)."""
    texts = template_parts(callee_text)[1]
    out = {}
    for i, (text, value) in enumerate(zip(texts, template_args or [], strict=False)):
        if value is None and i < len(given) and _IDENT.fullmatch(text.strip()) and \
                " ".join(given[i].split()) in _BYTES:
            out[text.strip()] = _BYTES[" ".join(given[i].split())]
    return out


def _deduced_types(fn, kernel_text: str, passed: list, given, data: bytes) -> dict[str, int]:
    """Bytes of the host's own type parameters where a launch without ``<...>`` lets C++ deduce
    the kernel's from the arguments: llama.cpp's ``cumsum_cuda<T>(const T * src, ...)``
    launches ``cumsum_kernel<<<...>>>(src, ...)``, whose ``const T * src`` makes the host's T
    the kernel's T (``given``: the kernel's template arguments the user named)."""
    root = fn
    while root.parent is not None:
        root = root.parent
    name = kernel_text.split("<")[0].strip()
    kernel = next((t for t in _walk(root) if t.type == "template_declaration" and any(
        c.type == "function_definition" and _host_params(c, data)[0] == name
        for c in t.named_children)), None)
    if kernel is None or not given:
        return {}
    plist = kernel.child_by_field_name("parameters")
    kparams = [_text(ids[-1], data) for p in (plist.named_children if plist else [])
               if (ids := [x for x in _walk(p) if x.type in ("identifier", "type_identifier")])]
    kfn = next(c for c in kernel.named_children if c.type == "function_definition")
    host_decl = {_text(n, data): _text(p, data) for p, n in _param_names(fn, data)}
    _, _, host_tparams = _host_params(fn, data)
    out = {}
    for (decl, _), arg in zip(_param_names(kfn, data), passed, strict=False):
        for k, tparam in enumerate(kparams[:len(given)]):
            scalar = " ".join(given[k].split())
            if scalar not in _BYTES or tparam not in _IDENT.findall(_text(decl, data)):
                continue
            for host_t in _IDENT.findall(host_decl.get(_text(arg, data).strip(), "")):
                if host_t in host_tparams:
                    out[host_t] = _BYTES[scalar]
    return out


def _param_names(fn, data: bytes) -> list[tuple]:
    """(parameter node, its name node) of function ``fn``, in order."""
    declarator = fn.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    plist = declarator.child_by_field_name("parameters") if declarator is not None else None
    out = []
    for p in plist.named_children if plist else []:
        if p.type in PARAMETER_NODES:
            ids = [x for x in _walk(p) if x.type == "identifier"]
            if ids:
                out.append((p, ids[-1] if p.type == PARAMETER_NODES[0] else ids[0]))
    return out


def _typed(text: str, types: dict[str, int]) -> str:
    for name, size in types.items():
        text = re.sub(rf"\bsizeof\s*\(\s*{re.escape(name)}\s*\)", str(size), text)
    return text


def _helper_launch(fn, call, parts, data: bytes, macros: dict[str, str],
                   given=(), sizes=(), constants=None) -> HostLaunch:
    """A launch through a helper: ``helper(kernel<...>, params, args...)``, the launch
    configuration the first three arguments of the constructor (or braced list) that built
    the local ``params``."""
    name = _text(parts[1], data).strip()

    def config(local: dict) -> list[str] | None:
        value = local.get(name)
        m = re.fullmatch(r"\s*(?:[\w:]+\s*)?(?:\((.*)\)|\{(.*)\})\s*", value, re.S) \
            if isinstance(value, str) else None
        if m is None:
            return None
        texts = split_template_args(m[1] if m[1] is not None else m[2], "()[]{}")
        return texts if len(texts) > 1 else [*texts, "1"]

    return _read_launch(fn, call, _text(parts[0], data), config, parts[2:], data, macros, given,
                        sizes, f"the launch parameters {name!r} are not a local built from a "
                        "constructor call or a braced list", constants)


def _dims(text: str, local: dict, macros: dict[str, str], params: list[str],
          problems: list[str], types: dict[str, int] | None = None,
          terms: HostTerms | None = None) -> list[str] | None:
    """A grid or block: a dim3 local, ``dim3(a, b, c)``, or one number."""
    text = _CAST.sub("", text).strip()
    value = local.get(text)
    m = re.fullmatch(r"dim3\s*\((.*)\)", text, re.S)
    if isinstance(value, list):
        parts = value
    elif m is not None:
        parts = (split_template_args(m[1], "()[]{}") + ["1", "1", "1"])[:3]
    else:
        parts = [text, "1", "1"]
    dims = [_size_expr(v, local, macros, params, problems, types, terms) for v in parts]
    return None if any(d is None for d in dims) else dims


def _launch(fn, call, config, kernel_text: str, data: bytes, macros: dict[str, str],
            given=(), sizes=(), constants=None) -> HostLaunch:
    """A ``kernel<<<grid, block, smem, stream>>>(args)`` launch (``kernel_text``: the kernel
    as launched, or as the local pointer launched was initialised)."""
    texts = [_text(c, data) for c in config.named_children if c.type != "comment"]
    args = call.child_by_field_name("arguments")
    return _read_launch(fn, call, kernel_text, lambda local: texts,
                        [a for a in (args.named_children if args else [])
                         if a.type != "comment"], data, macros, given, sizes, "", constants)


def _read_launch(fn, call, kernel_text: str, config, passed: list, data: bytes,
                 macros: dict[str, str], given, sizes, unreadable: str,
                 constants=None) -> HostLaunch:
    """The launch of ``call`` in host function ``fn``: ``config(locals)`` gives the texts of
    grid, block and shared memory (None when it cannot: ``unreadable`` says why), ``passed``
    the kernel's argument nodes. A local named in ``sizes`` is a size like a parameter, and so
    is a field of a host parameter that a size names (``params.batch``: ``batch``)."""
    host, params, tparams = _host_params(fn, data)
    structs = set(params)
    local = _locals(fn, call.start_byte, data)
    params += [s for s in sizes if s in local and s not in params]
    fields = {m[2] for m in FIELD_ACCESS.finditer(_text(fn, data))
              if m[1] in structs and m[2] in sizes and m[2] not in params}
    params += sorted(fields)
    out = HostLaunch(host, call.start_point[0] + 1, params)
    aliases = _aliases(fn, call.start_byte, data)
    kernel_text = _unaliased(kernel_text, aliases)
    out.template_args = _template_args(kernel_text, tparams, local, macros, params)
    bound = _bound(out, kernel_text, list(given), (tparams | _switch_names(call, data))
                   - set(params) - set(local), local, macros)
    texts = config(local)
    if texts is None:
        out.grid = out.block = None
        out.problems.append(unreadable)
        return out
    types = _type_sizes(kernel_text, out.template_args, given) if out.template_args is not None \
        else _deduced_types(fn, kernel_text, passed, given, data)
    types |= {n: _BYTES[" ".join(v.split())] for n, v in bound.items()
              if " ".join(v.split()) in _BYTES}
    fixed = bound | {n: v for n, v in local.items() if isinstance(v, str) and n not in bound
                     and _IDENT.fullmatch(v.strip()) is None and _folds(v, local, macros)}
    terms = HostTerms({a: _unaliased(t, aliases, fixed) for a, t in aliases.items()}, fixed,
                      structs, fields, set(_BYTES) | set(types), constants,
                      _integer_helpers(fn, data))
    out.grid = _dims(texts[0], local, macros, params, out.problems, types, terms)
    out.block = _dims(texts[1], local, macros, params, out.problems, types, terms) \
        if len(texts) > 1 else None
    if len(texts) > 2:
        out.shared_mem = _size_expr(texts[2], local, macros, params, out.problems, types,
                                    terms)
    out.args = [_size_expr(_text(a, data), local, macros, params, [], types, terms)
                for a in passed]
    out.arg_texts = [_text(a, data) for a in passed]
    for i, a in enumerate(passed):
        parts = _vector_value(_text(a, data), local, macros, params, types, terms)
        if parts is not None:
            out.vectors[i] = parts
    return out


_INTEGER = re.compile(r"^(?:(?:static|inline|constexpr|const|unsigned|signed|long|short|int|size_t|"
                      r"u?int(?:8|16|32|64)_t|__host__|__device__|__forceinline__)\s*)+$")


def _integer_helpers(fn, data: bytes) -> dict[str, str]:
    """The functions of ``fn``'s file that take one integer and return one, no template (a
    launch's ``next_power_of_2(ncols)``), by name: their text."""
    root = fn
    while root.parent is not None:
        root = root.parent
    out = {}
    for helper in (n for n in _walk(root) if n.type == "function_definition" and n is not fn):
        if helper.parent is not None and helper.parent.type == "template_declaration":
            continue
        name, params, _ = _host_params(helper, data)
        declarator = helper.child_by_field_name("declarator")
        head = data[helper.start_byte:declarator.start_byte].decode(errors="replace") \
            if declarator is not None else ""
        plist = declarator.child_by_field_name("parameters") if declarator is not None \
            and declarator.type == "function_declarator" else None
        typed = [data[p.start_byte:p.child_by_field_name("declarator").start_byte].decode()
                 for p in (plist.named_children if plist else [])
                 if p.type == "parameter_declaration" and p.child_by_field_name("declarator")
                 is not None and p.child_by_field_name("declarator").type == "identifier"]
        if len(params) == 1 and len(typed) == 1 and _INTEGER.match(head.strip() or "?") and \
                _INTEGER.match(typed[0].strip()) and _IDENT.fullmatch(name):
            out[name] = _text(helper, data)
    return out


_ALIAS = re.compile(r"^\s*using\s+([A-Za-z_]\w*)\s*=\s*(?:typename\s+)?(.+?)\s*;\s*$", re.S)
_TYPEDEF = re.compile(r"^\s*typedef\s+(?:typename\s+)?(.+?)\s+([A-Za-z_]\w*)\s*;\s*$", re.S)
_UNQUALIFIED = re.compile(r"(?<![.\w:])(?<!->)[A-Za-z_]\w*")


def _kernel_pointer(fn, call, callee: str, kernel: str, data: bytes) -> str | None:
    """The kernel a local function pointer ``callee``, launched at ``call``, was initialised
    with (``auto k = &kern<Ktraits>;`` or ``void (*k)(P) = kern<Ktraits>;``: ``kern<Ktraits>``);
    None when ``callee`` is no such local of ``fn`` or points at another kernel than
    ``kernel`` (its bare name)."""
    if not _IDENT.fullmatch(callee.strip()):
        return None
    v = re.escape(callee.strip())
    declared = re.compile(rf"(?:\bauto\s*(?:const\s*)?\*?\s*(?:const\s+)?{v}|\(\s*\*\s*"
                          rf"(?:const\s+)?{v}\s*\)\s*\([^;{{}}]*\))\s*=\s*([^;{{}}]+);")
    text = data[fn.start_byte:call.start_byte].decode(errors="replace")
    found = [m[1].strip() for m in declared.finditer(text)]
    target = found[-1].lstrip("(&").rstrip(")").strip() if found else ""
    return target if found and _bare(target) == kernel else None


def _aliases(fn, before: int, data: bytes) -> dict[str, str]:
    """The host function's type aliases (``using K = T;``, ``typedef T K;``) in scope at byte
    ``before``, by name."""
    out = {}
    for node in _walk(fn):
        if node.type not in ("alias_declaration", "type_definition") or node.end_byte > before \
                or not node.parent.start_byte <= before < node.parent.end_byte:
            continue
        text = _text(node, data)
        if m := _ALIAS.match(text):
            out[m[1]] = m[2]
        elif m := _TYPEDEF.match(text):
            out[m[2]] = m[1]
    return out


def _unaliased(text: str, aliases: dict[str, str], bound: dict[str, str] | None = None) -> str:
    """``text`` with the host's type aliases (and names ``bound``) written out."""
    for _ in range(4):
        text = _UNQUALIFIED.sub(lambda m: aliases.get(m[0], (bound or {}).get(m[0], m[0])), text)
    return text


def _switch_names(call, data: bytes) -> set[str]:
    """The constants switch macros around ``call`` define for the lambda they run:
    ``BOOL_SWITCH(cond, kIsVecLoad, [&] {...})``'s ``kIsVecLoad`` (static_switch.h's pattern,
    in causal-conv1d, mamba and flash-attention): the names passed beside the lambda."""
    out, node = set(), call.parent
    while node is not None:
        if node.type == "lambda_expression" and node.parent is not None and \
                node.parent.type == "argument_list":
            out |= {_text(a, data) for a in node.parent.named_children if a.type == "identifier"}
        node = node.parent
    return out


def _bound(out: HostLaunch, kernel_text: str, given: list[str], bindable: set[str],
           local: dict, macros: dict[str, str]) -> dict[str, str]:
    """The host's template parameters (and switch constants: ``bindable``) bound from the
    user's instantiation ``given`` (agent/host_consts.bind_template): an argument over
    them that cannot equal the given one (``Traits<kN, 1>`` for ``Traits<64, 2>``) is no
    longer any value in ``template_args``, and a bound value becomes a local. Returns the
    bound names' texts."""
    if not given or out.template_args is None:
        return {}

    def fold(text: str):
        return _folds(text, local, macros)
    launched = template_parts(kernel_text)[1]
    bound, verdicts = bind_template(launched, given, bindable, fold)
    for i, verdict in enumerate(verdicts[:len(out.template_args)]):
        if verdict is False and out.template_args[i] is None:  # not this instantiation
            out.template_args[i] = _unaliased(launched[i], {}, bound)
    for name, value in bound.items():
        if fold(value) is not None:
            local[name] = value
    return bound


def _folds(text: str, local: dict, macros: dict[str, str]):
    """``text``'s constant value over the host's locals and macros; None when it has none."""
    folded = _size_expr(text, local, macros, [], [])
    try:
        return _const(folded) if folded is not None else None
    except ValueError:
        return None


_FASTDIV = re.compile(r"^init_fastdiv_values\s*\((.*)\)$", re.S)
_MAKE_VECTOR = re.compile(r"^make_[a-z]+([234])\s*\((.*)\)$", re.S)


def _vector_value(text: str, local: dict, macros: dict[str, str], params: list[str],
                  types: dict[str, int], terms: HostTerms | None = None) -> list[str] | None:
    """The components of a CUDA vector the launch passes, as size expressions: from
    ``make_uint3(a, b, c)`` or llama.cpp's ``init_fastdiv_values(d)`` (the fast-division
    constants <multiplier, shift, d>), directly or through a local; None otherwise."""
    text = text.strip()
    for _ in range(4):
        value = local.get(text)
        if not isinstance(value, str):
            break
        text = value.strip()
    if m := _FASTDIV.match(text):
        d = _size_expr(m[1], local, macros, params, [], types, terms)
        return None if d is None else [f"fastdiv_mult({d})", f"ceil_log2({d})", d]
    if m := _MAKE_VECTOR.match(text):
        parts = [_size_expr(x, local, macros, params, [], types, terms)
                 for x in split_template_args(m[2], "()[]{}")]
        return parts if None not in parts and len(parts) == int(m[1]) else None
    return None


def _locals(fn, before: int, data: bytes) -> dict[str, str | list[str]]:
    """The host function's local values declared before byte ``before``: ``x = expr`` and
    ``dim3 x(a, b, c)`` / ``dim3 x = dim3(a, b, c)`` (a list of three)."""
    out: dict[str, str | list[str]] = {}
    for decl in (n for n in _walk(fn) if n.type == "declaration" and n.end_byte <= before):
        kind = _text(decl.child_by_field_name("type"), data) if decl.child_by_field_name(
            "type") else ""
        for vexing in (c for c in decl.named_children if c.type == "function_declarator"):
            plist = vexing.child_by_field_name("parameters")  # `dim3 g(a, b, c * d)`, read
            name = vexing.child_by_field_name("declarator")  # as a function declaration
            if "dim3" in kind and plist is not None and name is not None:
                dims = [_text(p, data) for p in plist.named_children]
                out[_text(name, data)] = (dims + ["1", "1", "1"])[:3]
        for init in (c for c in decl.named_children if c.type == "init_declarator"):
            var = init.child_by_field_name("declarator")
            value = init.child_by_field_name("value") or next(  # `dim3 g(a, b, c)`
                (c for c in init.named_children if c.type in ("argument_list",
                                                               "initializer_list")), None)
            if var is None or value is None or var.type != "identifier":
                continue
            if "dim3" in kind:
                values = value.named_children if value.type in ("argument_list",
                                                                "initializer_list") else \
                    (value.child_by_field_name("arguments").named_children
                     if value.type == "call_expression" and value.child_by_field_name(
                        "arguments") else [value])
                dims = [_text(v, data) for v in values]
                out[_text(var, data)] = (dims + ["1", "1", "1"])[:3]
            else:
                out[_text(var, data)] = _text(value, data)
    for node in _walk(fn):
        if node.type == "assignment_expression" and node.end_byte <= before:
            _assign(node, out, before, data)
    return out


_BLOCKS = ("compound_statement", "case_statement", "if_statement", "for_statement",
           "while_statement", "do_statement", "for_range_loop")


def _assign(node, local: dict, before: int, data: bytes) -> None:
    """A local's value after ``x = e`` / ``x op= e`` (file order): the new expression where the
    assignment runs whenever the launch at byte ``before`` does (its block holds the launch:
    llama.cpp's ``block_size = std::min(block_size, CUDA_CUMSUM_BLOCK_SIZE)``), else the local
    is unknown (assigned in a branch the launch may not take: the launch is not read from it)."""
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    name = _text(left, data).strip() if left is not None and left.type == "identifier" else None
    if name not in local or right is None:
        return
    block = node.parent
    while block is not None and block.type not in _BLOCKS:
        block = block.parent
    if block is None or not block.start_byte <= before < block.end_byte or \
            isinstance(local[name], list):
        del local[name]
        local[f"#{name}"] = f"{name} is assigned in a branch the launch may not take (line " \
                            f"{node.start_point[0] + 1})"
        return
    op = _text(node.child_by_field_name("operator"), data).strip() \
        if node.child_by_field_name("operator") is not None else "="
    value = _text(right, data) if op == "=" else f"{name} {op[:-1]} ({_text(right, data)})"
    old = f"({local[name]})"  # the value before: `b = min(b, 256)` reads it
    local[name] = _NOT_MEMBER.sub(lambda m: old if m[0] == name else m[0], value)


def size_names(exprs: list[str]) -> list[str]:
    """The size names size expressions ``exprs`` use (not their functions), in order."""
    seen = []
    for expr in exprs:
        for node in ast.walk(ast.parse(str(expr).strip(), mode="eval")):
            if isinstance(node, ast.Name) and node.id not in FUNCTIONS and \
                    node.id not in seen:
                seen.append(node.id)
    return seen


def _size_expr(text: str, local: dict, macros: dict[str, str], params: list[str],
               problems: list[str], types: dict[str, int] | None = None,
               terms: HostTerms | None = None) -> str | None:
    """``text`` as a size expression over ``params``, or None (a reason in ``problems``)."""
    for _ in range(8):  # locals and macros, a few levels deep
        changed = False
        if terms is not None and (text := host_terms(text, terms, problems)) is None:
            return None
        text = _WARP_SIZE.sub("32", text)
        text = _QUALIFIED.sub(lambda m: "" if m[0] != "std::" else m[0], text)  # ns::name
        text = re.sub(r"\b(min|max)\s*<[^<>()]*>\s*\(", r"\1(", text)  # std::min<int64_t>(

        def member(m: re.Match) -> str:  # `block_dims.x` of a dim3 local
            nonlocal changed
            changed = True
            return f"({local[m[1]]['xyz'.index(m[2])]})"

        text = re.sub(r"\b([A-Za-z_]\w*)\s*\.\s*([xyz])\b",
                      lambda m: member(m) if isinstance(local.get(m[1]), list) else m[0], text)

        def sub(m: re.Match) -> str:
            nonlocal changed
            value = local.get(m[0], macros.get(m[0]))
            if isinstance(value, str) and m[0] not in params:
                changed = True
                return f"({value})"
            return m[0]

        text = _NOT_MEMBER.sub(sub, text)  # `info.warp_size`'s member is no local
        if not changed:
            break
    text = _SIZEOF.sub(lambda m: str(_BYTES[" ".join(m[1].split())]), _typed(text, types or {}))
    text = _STATIC_CAST.sub("", _CAST.sub("", text))
    text = re.sub(r"\bstd::(min|max)\b", r"\1", text)
    # ggml's and the CUDA samples' MIN/MAX macros
    text = re.sub(r"\b(MIN|MAX)\s*\(", lambda m: m[1].lower() + "(", text)
    text = re.sub(r"(?<![/])/(?![/])", "//", text)  # C integer division
    text = re.sub(r"(\d+)[uUlL]+\b", r"\1", text)
    text = _ternaries(text.strip())
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        problems.append(f"cannot read {text.strip()!r} as a size expression")
        return None
    names = set(size_names([text.strip()]))
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load,
               ast.Call, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub,
               ast.LShift, ast.RShift, ast.IfExp, ast.Compare, ast.Lt, ast.LtE, ast.Gt,
               ast.GtE, ast.Eq, ast.NotEq)
    if not all(isinstance(n, allowed) for n in ast.walk(tree)) or names - set(params):
        problems.append(f"{text.strip()!r} depends on "
                        f"{', '.join(sorted(names - set(params))) or 'what sizes cannot say'}"
                        + "".join(f": {local[f'#{n}']}" for n in sorted(names - set(params))
                                  if f"#{n}" in local))
        return None
    return " ".join(text.split())


def _ternaries(text: str) -> str:
    """C's ``c ? a : b`` (at any depth of parentheses) as Python's ``(a if c else b)``."""
    depth, q = 0, None
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "?" and q is None:
            q, qdepth = i, depth
        elif ch == ":" and q is not None and depth == qdepth:
            start, level = q, 0  # after the `(` that holds the whole `c ? a : b`
            while start > 0 and not (text[start - 1] == "(" and level == 0):
                level += (text[start - 1] == ")") - (text[start - 1] == "(")
                start -= 1
            end = i + 1
            level = 0
            while end < len(text) and not (text[end] == ")" and level == 0):
                level += (text[end] == "(") - (text[end] == ")")
                end += 1
            cond, yes, no = text[start:q], text[q + 1:i], text[i + 1:end]
            return _ternaries(f"{text[:start]}({_ternaries(yes)} if {_ternaries(cond)} else "
                              f"{_ternaries(no)}){text[end:]}")
    return text
