"""Standalone .metal files: ``kernel void f(... [[buffer(i)]], ... [[thread_position_in_grid]])``.

    lib = MetalLibrary(Path("k.metal").read_text())
    run = lib.function("f").launch({0: x, 1: y}, grid=(n, 1, 1), threadgroup=(256, 1, 1))

Buffers are given by ``[[buffer(i)]]`` index as numpy arrays (pointers; written back when the
parameter is not const) or numpy scalars (``constant T& p`` parameters). ``grid`` counts threads
(``dispatchThreads``: edge groups are non-uniform); pass ``threadgroups=`` instead for
``dispatchThreadgroups``. ``[[threadgroup(0)]]`` parameters get ``threadgroup_memory`` bytes.
Template kernels are found by the ``host_name`` of their explicit instantiation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runners import conditionals, srcrewrite
from runners.metal_sim import allowlist, expanded, function_constants, spaces
from runners.metal_sim.codegen import ATTRIBUTE_HELPERS, ATTRIBUTE_VALUES, ATTRIBUTES
from runners.metal_sim.kernel import _SYNC, THREADGROUP_MEMORY
from runners.settings import load_settings
from runners.simbuild import Vetting, build_kernel, kernel_tail
from runners.simhost import BufferArg, LaunchSpec, SimRecord, launch_dims, run_launch

_ATTR_TYPES = dict(ATTRIBUTES)
_HEAD = "#include <kport/rt.h>\n#include <kport/metal_stdlib.h>\n"
_INSTANTIATION = re.compile(
    r"template\s*\[\[\s*host_name\(\s*\"(?P<host>[^\"]+)\"\s*\)\s*\]\]\s*(?:\[\[\s*kernel\s*\]\]\s*)?"
    r"(?:kernel\s+)?(?:decltype\((?P<decl>[^;]*?)\)|void|[\w:]+)\s+(?P<inst>[\w:]+<[^;]*>)\s*"
    r"(?:\([^;]*\))?\s*;")


@dataclass
class Param:
    name: str
    type: str  # as written, address spaces included
    attribute: str  # buffer(2), thread_position_in_grid, threadgroup(0), ...

    @property
    def buffer_index(self) -> int | None:
        m = re.fullmatch(r"buffer\((\d+)\)", self.attribute)
        return int(m[1]) if m else None

    @property
    def writable(self) -> bool:
        return "const" not in self.type.split("*")[0] and "constant" not in self.type


MetalRun = SimRecord  # what MetalFunction.launch returns


def _split_params(parts: list[list[srcrewrite.Tok]]) -> list[Param]:
    params = []
    for part in parts:
        text = srcrewrite._join(part)
        m = re.fullmatch(r"(?P<decl>.*?)\[\[\s*(?P<attr>[^\]]+?)\s*\]\]\s*", text, re.S)
        if not m:
            raise srcrewrite.SourceError(f"kernel parameter `{text}` has no [[attribute]]")
        decl = m["decl"].strip()
        name = re.search(r"([A-Za-z_]\w*)\s*$", decl)
        if not name:
            raise srcrewrite.SourceError(f"cannot read the kernel parameter `{text}`")
        params.append(Param(name[1], decl[: name.start()].strip(), m["attr"].replace(" ", "")))
    return params


def _find_kernel(toks: list[srcrewrite.Tok], name: str) -> list[Param]:
    parts = srcrewrite.function_params(toks, name, "kernel", lookback=8)
    if parts is None:
        raise srcrewrite.SourceError(f"no `kernel void {name}(...)` in the Metal source")
    return _split_params(parts)


def _attribute_value(p: Param) -> str:
    value = ATTRIBUTE_VALUES.get(p.attribute)
    if value is None:
        raise srcrewrite.SourceError(f"parameter `{p.name}`: [[{p.attribute}]] is not supported")
    base = re.sub(r"\b(const|thread)\b", "", p.type).strip()
    if _ATTR_TYPES[p.attribute] == "uint":
        return f"({base})({value})"
    lanes = base[-1] if base[-1] in "23" else "1"
    v = f"({value})"
    if lanes == "1":
        return f"({base})({v}.x)"
    comps = ", ".join(f"{v}.{c}" for c in "xyz"[: int(lanes)])
    return f"__kp::make<{base}>({comps})"


class MetalFunction:
    """One kernel of a MetalLibrary; ``launch`` runs it and returns a MetalRun record."""

    def __init__(self, library: MetalLibrary, name: str, call: str, params: list[Param],
                 constants: dict | None = None):
        self.library, self.name, self.call, self.params = library, name, call, params
        self.constants = dict(constants or {})

    def _entry(self) -> str:
        # Buffer parameter types come from the function's own type, so template kernels work.
        args, slot = [], 0
        for k, p in enumerate(self.params):
            arg = f"__kp_F::template arg<{k}>"
            if p.buffer_index is not None:
                ptr = f"(*(void* __KP_RT*)((void* __KP_RT*)__kp_a)[{slot}])"
                slot += 1
                args.append(f"*(__remove_reference_t({arg})*){ptr}" if p.type.endswith("&")
                            else f"({arg}){ptr}")
            elif p.attribute.startswith("threadgroup("):
                args.append(f"({arg})__kp_dyn_smem()")
            else:
                args.append(_attribute_value(p))
        preamble = ("template <class F> struct __kp_fn;\n"
                    "template <class R, class... A> struct __kp_fn<R (*)(A...)> {\n"
                    "  template <unsigned I> using arg = __type_pack_element<I, A...>; };\n"
                    f"using __kp_F = __kp_fn<decltype(&{self.call})>;\n")
        body = f"  const __kp_thread __KP_RT* __kp_t = __kp_cur;\n  {self.call}({', '.join(args)});"
        return kernel_tail("metal", bool(_SYNC.search(self.library.source)), preamble, body)

    def launch(self, buffers: dict[int, object], *, grid=None, threadgroup=(1, 1, 1),
               threadgroups=None, threadgroup_memory: int = 0, count: bool = False) -> MetalRun:
        """Run once; returns a MetalRun record. ``count``: a checked run that also fills its
        ``counters`` (runners/perf_model.py)."""
        tg = launch_dims(threadgroup, "threadgroup")
        if (grid is None) == (threadgroups is None):
            raise ValueError("give exactly one of grid= (threads) and threadgroups=")
        if threadgroups is not None:
            groups = launch_dims(threadgroups, "threadgroups")
            threads = tuple(g * t for g, t in zip(groups, tg, strict=True))
        else:
            threads = launch_dims(grid, "grid")
            tg = tuple(min(t, g) for t, g in zip(tg, threads, strict=True))
            groups = tuple(-(-g // t) for g, t in zip(threads, tg, strict=True))
        args, arrays = [], {}
        for p in self.params:
            index = p.buffer_index
            if index is None:
                continue
            if index not in buffers:
                raise ValueError(f"kernel `{self.name}` needs buffer({index}) for `{p.name}`")
            value = buffers[index]
            array = value if isinstance(value, np.ndarray) else np.asarray(value)
            writable = p.writable and isinstance(value, np.ndarray)
            args.append(BufferArg(p.name, array.reshape(-1), "inout" if writable else "in"))
            if writable:
                arrays[p.name] = value
        settings = load_settings()
        lib = self.library
        vetting = lib.vetting(settings)
        if isinstance(vetting, MetalRun):  # refused before anything is compiled
            return vetting
        checked = count or bool(settings.sim_check_set)
        build = build_kernel(lib.translation_unit(constants=self.constants) + self._entry(),
                             checked=checked, settings=settings, vetting=vetting,
                             count=count)
        if not build.ok:
            return MetalRun(False, diagnostics=build.diagnostics, build=build)
        spec = LaunchSpec(groups=groups, threadgroup=tg, grid_threads=threads,
                          nonuniform=threadgroups is None, tg_mem_limit=THREADGROUP_MEMORY,
                          dyn_smem=int(threadgroup_memory), checked=checked, count=count)
        result = run_launch(build.library, spec, args, settings,
                            source_file=self.library.filename)
        for name, array in arrays.items():
            if name in result.outputs:
                array[...] = result.outputs[name].reshape(array.shape)
        return MetalRun(True, findings=result.findings, diagnostics=build.diagnostics,
                        outputs=list(arrays.values()) if result.status == "ok" else [],
                        printf=result.printf, source=lib.source, kernel_s=result.kernel_s,
                        build=build, extents=result.extents, counters=result.counters)


def _bare_instantiation(m: re.Match) -> str:
    """An explicit instantiation as plain C++: its Metal attributes and `kernel` removed."""
    return re.sub(r"\[\[.*?\]\]|\bkernel\b", "", m[0])


class MetalLibrary:
    """A .metal source file, compiled on demand; ``function(name)`` picks a kernel."""

    def __init__(self, source: str, filename: str = "kernel.metal",
                 macros: dict[str, int | float | str] | None = None):
        """``macros``: preprocessor macros the build defines (Metal's
        MTLCompileOptions.preprocessorMacros; llama.cpp sets GGML_METAL_HAS_BF16 so): names
        a kernel may declare, values numbers or names."""
        # the name goes into #line: a plain file name, never one of kport's own paths
        name = Path(filename).name
        self.source = source
        self.filename = name if re.fullmatch(r"[\w.-]+\.metal", name) else "kernel.metal"
        self.instantiations = {m["host"]: m["inst"] for m in _INSTANTIATION.finditer(source)}
        allowlist.check_names(list(macros or {}), "macro")
        for key, value in (macros or {}).items():
            if isinstance(value, bool) or not (isinstance(value, (int, float)) or isinstance(
                    value, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*|[0-9][0-9A-Za-z_.]*",
                                                 value)):
                raise ValueError(f"macro {key}: {value!r} is not a number or a name")
        self.macros = dict(macros or {})
        self.defines = "".join(f"#define {k} {v}\n" for k, v in self.macros.items())

    def build(self) -> MetalRun:
        """Compile the whole library, running nothing: every function, and every template
        kernel as each explicit instantiation (``[[host_name]]``) makes it. Returns a MetalRun
        record (``compiled``, ``diagnostics``); a build once made is cached."""
        settings = load_settings()
        vetting = self.vetting(settings)
        if isinstance(vetting, MetalRun):  # refused before anything is compiled
            return vetting
        tu = self.translation_unit(instantiate=True) + kernel_tail("metal", False, "", "")
        build = build_kernel(tu, checked=False, settings=settings, vetting=vetting)
        return MetalRun(build.ok, diagnostics=build.diagnostics, build=build)

    def vetting(self, settings) -> Vetting | MetalRun:
        """The checks of a build of this source, or the refusal (a MetalRun) when the
        allow-list's pass over the source as written refuses lines the compiler reads whatever
        the #if conditions; findings inside #if groups wait for clang (conditionals.py)."""
        problems = allowlist.source_problems(self.source, self.filename)
        now, pending = conditionals.split(problems, {self.filename: self.source})
        if now:
            return MetalRun(False, diagnostics=[p.diagnostic() for p in now])
        return expanded.with_address_spaces(
            expanded.vetting({self.filename}, self.filename, self.vetted_unit(pending),
                             pending),
            {self.filename}, self.check_unit(), settings)

    def function(self, name: str, constants: dict | None = None) -> MetalFunction:
        """The kernel ``name`` (a function, or the host_name of an explicit instantiation);
        ``constants``: function constant values by name or index, as Metal's
        MTLFunctionConstantValues gives them (runners/metal_sim/function_constants.py)."""
        call = self.instantiations.get(name, name)
        base = call.split("<")[0].split("::")[-1]
        toks = srcrewrite.tokenize(self.source)
        function_constants.table(self.source, constants)  # a bad name or value: ValueError now
        return MetalFunction(self, name, call, _find_kernel(toks, base), constants)

    def translation_unit(self, *, instantiate: bool = False,
                         constants: dict | None = None) -> str:
        """The C++ the simulator compiles (the entry follows it); the source's macros end
        with it. ``instantiate``: keep every explicit instantiation (for ``build``);
        ``constants``: the function constants' values."""
        # Else explicit instantiations are dropped: the entry's call instantiates what it needs.
        code = function_constants.rewrite(allowlist.blank_includes(self.source))
        code = _INSTANTIATION.sub(_bare_instantiation if instantiate else lambda m: " " * len(
            m[0].split("\n")[0]) + "\n" * m[0].count("\n"), code)
        code = srcrewrite.rewrite_group_storage(code, "threadgroup")
        code = srcrewrite.strip_address_spaces(code)
        code = srcrewrite.rewrite_metal_constructors(code)
        code = re.sub(r"\bkernel\b(?=\s+void)", "      ", code)
        names = allowlist.macro_names(self.source) + list(self.macros) + [
            c.name for c in function_constants.declared(self.source)]
        undefs = "".join(f"#undef {n}\n" for n in names)
        return (_HEAD + ATTRIBUTE_HELPERS + function_constants.table(self.source, constants)
                + self.defines + f'#line 1 "{self.filename}"\n{code}\n'
                + '#line 1 "kport-entry"\n' + undefs)

    def check_unit(self) -> str:
        """The address-space check unit (spaces.py): explicit instantiations kept, without
        their Metal attributes, so template kernels are checked as instantiated."""
        code = _INSTANTIATION.sub(_bare_instantiation, function_constants.rewrite(
            allowlist.blank_includes(self.source)))
        code = re.sub(r"\bkernel\b(?=\s+void)", "      ", spaces.check_text(code))
        return (spaces.CHECK_DEFINE + _HEAD + spaces.CHECK_HEAD
                + function_constants.table(self.source, None) + self.defines
                + f'#line 1 "{self.filename}"\n{code}\n')

    def vetted_unit(self, pending: conditionals.Pending | None = None) -> str:
        """The source as written, for the allow-list's preprocessed pass (with the markers of
        its #if groups when findings wait on them)."""
        text = allowlist.blank_includes(self.source)
        if pending:
            text = pending.mark(self.filename, text)
        return _HEAD + self.defines + f'#line 1 "{self.filename}"\n' + text + "\n"
