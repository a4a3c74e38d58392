"""`metal_kernel`: a drop-in for `mx.fast.metal_kernel` (MLX 0.32) that runs in the simulator.

``kernel(...)`` returns a list of mx.array like MLX; a compile error raises CompileError (MLX
raises RuntimeError too) with lines of *your* source, and a kernel that faults (out-of-bounds,
race, divergence, timeout, crash) raises KernelFault listing the findings. ``kernel.launch(...)``
takes the same arguments and returns a SimRun record instead of raising, for harnesses.
"""

from __future__ import annotations

import math
import re

import numpy as np

from runners import conditionals, limits, srcrewrite, workitems
from runners.dtypes import DTYPES, Tensor, dtype_name, poison, to_mx, to_tensor
from runners.metal_sim import allowlist, codegen, expanded, spaces
from runners.settings import load_settings
from runners.simbuild import build_modes, kernel_tail
from runners.simfaults import CompileError, KernelFault
from runners.simhost import MAX_LAUNCH_BYTES, BufferArg, LaunchSpec, SimRecord, run_launch

MAX_THREADS_PER_THREADGROUP = limits.METAL_MAX_THREADS_PER_THREADGROUP
THREADGROUP_MEMORY = 32768  # bytes per threadgroup on Apple GPUs
_SYNC = re.compile(r"\b(threadgroup_barrier|simdgroup_barrier|simd_\w+|quad_\w+|"
                   r"simdgroup_multiply\w*)\b")
# simdgroup_load / simdgroup_store and a diagonal simdgroup_matrix read the calling thread's
# lane from the runtime's thread state (kport/metal/simdgroup_matrix.h), which work-item loops
# keep in registers: such kernels run in the plain thread loop.
_SIMDGROUP_MATRIX = re.compile(r"\bsimdgroup_(load|store|matrix|float8x8|half8x8|bfloat8x8)\b")


# Attributes that differ between the threads of a group (work-item loops recompute them).
_THREAD_ATTRIBUTES = frozenset({
    "quadgroup_index_in_threadgroup", "simdgroup_index_in_threadgroup",
    "thread_index_in_quadgroup", "thread_index_in_simdgroup", "thread_index_in_threadgroup",
    "thread_position_in_grid", "thread_position_in_threadgroup"})
SimRun = SimRecord  # what MetalKernel.launch returns: outputs are mx.arrays, source MLX's text


def _line_directives(full: str, rewritten: str, header: str, source: str, sig_end: int) -> str:
    """Insert #line directives so clang names header.metal / source.metal lines."""
    def line_of(offset: int) -> int:
        return full.count("\n", 0, offset) + 1

    src_first = line_of(sig_end)
    src_last = line_of(sig_end + len(source))
    marks = {}
    if header:
        marks[1] = '#line 1 "header.metal"'
    sig_first = line_of(len(header)) + (0 if not header or header.endswith("\n") else 1)
    if sig_first < src_first:
        marks.setdefault(sig_first, f'#line {sig_first} "mlx-signature"')
    marks[src_first] = '#line 1 "source.metal"'
    marks[src_last + 1] = f'#line {src_last + 1} "mlx-signature"'
    out = []
    for number, text in enumerate(rewritten.split("\n"), start=1):
        if number in marks:
            out.append(marks[number])
        out.append(text)
    return "\n".join(out)


_CANDIDATE_FILES = {"header.metal", "source.metal"}  # the user's parts of the TU (#line names)
_TU_HEAD = """#include <kport/rt.h>
#include <kport/metal_stdlib.h>
#include <kport/mlx_prelude.h>
"""


# A 0-d input (`const constant T& x`) of a scalar type binds to a copy read through __KP_RT:
# checked builds' hooks then see no read of kport's slot at each use (a runtime call each).
_SCALAR_REF = """template <class __KpT>
static inline __attribute__((always_inline)) decltype(auto) __kp_ref_arg(void* __kp_p) {
  if constexpr (__is_scalar(__KpT)) return (__KpT)*(const __KpT __KP_RT*)__kp_p;
  else return *(const __KpT*)__kp_p;
}
"""


def _entry_body(func: str, template, params: list[codegen.Param], attributes) -> str:
    args = []
    for i, p in enumerate(params):
        ptr = f"(*(void* __KP_RT*)((void* __KP_RT*)__kp_a)[{i}])"  # kport's slots: unchecked
        if p.kind == "input":
            args.append(f"(const {p.c_type}*){ptr}")
        elif p.kind in ("input_ref", "ndim"):
            args.append(f"__kp_ref_arg<{p.c_type}>({ptr})")
        elif p.kind in ("shape", "strides"):
            args.append(f"(const {p.c_type}*){ptr}")
        else:
            args.append(f"({p.c_type}*){ptr}")
    args += [codegen.ATTRIBUTE_VALUES[a] for a, _ in attributes]
    call = func + (codegen.template_string(template) if template else "")
    return f"  const __kp_thread __KP_RT* __kp_t = __kp_cur;\n  {call}({', '.join(args)});"


def _template_values(template) -> list[tuple[str, object]]:
    out = []
    for name, value in template or []:
        if isinstance(value, (bool, int)):
            out.append((name, value))
        else:
            out.append((name, codegen.dtype_spelling(dtype_name(value))))
    return out


class MetalKernel:
    """What ``metal_kernel(...)`` returns: call it like the MLX kernel object."""

    def __init__(self, name, input_names, output_names, source, header="",
                 ensure_row_contiguous=True, atomic_outputs=False, compile_options=None):
        if not output_names:
            raise ValueError("[metal_kernel] Must specify at least one output.")
        math_mode = (compile_options or {}).get("math_mode", "safe")
        if math_mode not in ("safe", "relaxed", "fast"):
            raise ValueError(f"[metal_kernel] Unknown math_mode {math_mode!r}.")
        # MLX declares the kernel as custom_kernel_<name>..., so a keyword (`double`) is a fine
        # name; what is pasted after the prefix must still continue an identifier.
        if not re.fullmatch(r"[A-Za-z0-9_]+", name):
            raise ValueError(f"[metal_kernel] name {name!r} is not a name a kernel may use: "
                             "letters, digits and _ (MLX declares custom_kernel_<name>)")
        allowlist.check_names(list(input_names) + list(output_names), "input/output name")
        self.name, self.source, self.header = name, source, header
        self.input_names, self.output_names = list(input_names), list(output_names)
        self.ensure_row_contiguous = ensure_row_contiguous
        self.atomic_outputs = atomic_outputs

    def generated_source(self, inputs: list[Tensor], out_types: list[str], template) -> tuple:
        func = codegen.kernel_name(self.name, template, inputs, out_types)
        text, params = codegen.signature(func, self.header, self.source, self.input_names,
                                         inputs, self.output_names, out_types, template,
                                         self.atomic_outputs)
        return func, text, params

    def _translation_units(self, inputs, out_types, template,
                           pending: conditionals.Pending | None = None) -> tuple[str, str, str]:
        """(the TU to compile, the TU the allow-list vets: the candidate's text as written,
        before the simulator's rewrites, its header ended by a newline so that no line holds
        both the header and MLX's signature, with the markers of its #if groups when
        ``pending`` findings wait on them, and the address-space check unit: spaces.py), all
        with `#include <metal_*>` lines blanked."""
        header, source = allowlist.blank_includes(self.header), allowlist.blank_includes(
            self.source)
        func = codegen.kernel_name(self.name, template, inputs, out_types)

        def generate(header: str, source: str = source) -> tuple[str, list, int]:
            text, params = codegen.signature(func, header, source, self.input_names, inputs,
                                             self.output_names, out_types, template,
                                             self.atomic_outputs)
            return text, params, text.rindex(source + "\n}\n") if source else len(text) - 3

        text, params, sig_end = generate(header)
        rewritten = srcrewrite.rewrite_group_storage(text, "threadgroup")
        rewritten = srcrewrite.strip_address_spaces(rewritten)
        rewritten = srcrewrite.rewrite_metal_constructors(rewritten)
        body = _line_directives(text, rewritten, header, source, sig_end)
        attributes = codegen.used_attributes(self.source)
        # the candidate's macros end with its text: kport's entry code below must not see them
        undefs = "".join(f"#undef {n}\n" for n in allowlist.macro_names(header + "\n" + source))
        entry = _entry_body(func, template, params, attributes)
        tu = (_TU_HEAD + codegen.ATTRIBUTE_HELPERS + body + "\n" + undefs
              + kernel_tail("metal", bool(_SYNC.search(self.header + self.source)), _SCALAR_REF,
                            entry))
        try:
            formed = _line_directives(text, self._work_items(rewritten, func, attributes),
                                      header, source, sig_end)
            regions = (_TU_HEAD + codegen.ATTRIBUTE_HELPERS + formed + "\n" + undefs
                       + kernel_tail("metal", False, _SCALAR_REF, entry, regions=True))
        except workitems.NotFormed:
            regions = None
        instance = ""
        if template:  # the check instantiates the kernel's body
            full = func + codegen.template_string(template)
            instance = f'#line 1 "kport-entry"\ntemplate decltype({full}) {full};\n'
        check = (spaces.CHECK_DEFINE + _TU_HEAD + spaces.CHECK_HEAD + _line_directives(
            text, spaces.check_text(text), header, source, sig_end) + "\n" + instance)
        vet_header = header + "\n" if header and not header.endswith("\n") else header
        vet_source = source
        if pending:
            vet_header = pending.mark("header.metal", vet_header)
            vet_source = pending.mark("source.metal", source)
        text, _, sig_end = generate(vet_header, vet_source)
        return (tu, _TU_HEAD + _line_directives(text, text, vet_header, vet_source, sig_end)
                + "\n", check, regions)

    def _work_items(self, rewritten: str, func: str, attributes) -> str:
        """The rewritten kernel in work-item loops (runners/workitems.py); NotFormed when it
        keeps fibers: a SIMD-group function, or a barrier in the header."""
        syncs = {m[0] for m in _SYNC.finditer(self.header + self.source)}
        if (syncs - {"threadgroup_barrier"} or _SYNC.search(self.header)
                or _SIMDGROUP_MATRIX.search(self.header + self.source)):
            raise workitems.NotFormed("SIMD-group functions, or a barrier in the header")
        varying = {a: f"const {t} {a} = {codegen.ATTRIBUTE_VALUES[a]};" for a, t in attributes
                   if a in _THREAD_ATTRIBUTES}
        return workitems.form_regions(
            rewritten, func, language="cpp", barrier="threadgroup_barrier",
            uniform={a for a, _ in codegen.ATTRIBUTES} - _THREAD_ATTRIBUTES, varying=varying)

    def _source_problems(self) -> tuple[list, conditionals.Pending]:
        """(what the allow-list refuses now, the findings inside #if groups that wait for
        clang's verdict on them: conditionals.py)."""
        found, pending = conditionals.split(
            allowlist.mlx_parts_problems(self.header, self.source),
            {"header.metal": self.header, "source.metal": self.source})
        if self.header and not self.header.endswith("\n") and allowlist.ends_in_directive(
                self.header):
            found.append(allowlist.Problem(
                "header.metal", self.header.count("\n") + 1, "directive", "the header ends "
                "inside a #-line with no newline: MLX writes the kernel's signature right "
                "after it, into the directive; end the header with a newline"))
        return found, pending

    def launch(self, *, inputs, output_shapes, output_dtypes, grid, threadgroup, template=None,
               init_value=None, verbose=False, stream=None, count: bool = False) -> SimRun:
        """Run once; returns a SimRun (never raises for faults of the kernel itself).
        ``count``: a checked run that also fills its ``counters`` (runners/perf_model.py)."""
        if len(inputs) != len(self.input_names):
            raise ValueError(f"[metal_kernel] Expected `inputs` to have size "
                             f"{len(self.input_names)} but got size {len(inputs)}.")
        if len(output_shapes) != len(self.output_names):
            raise ValueError(f"[metal_kernel] Expected `output_shapes` to have size "
                             f"{len(self.output_names)} but got size {len(output_shapes)}.")
        if len(output_dtypes) != len(self.output_names):
            raise ValueError(f"[metal_kernel] Expected `output_dtypes` to have size "
                             f"{len(self.output_names)} but got size {len(output_dtypes)}.")
        tensors = [to_tensor(x, keep_strides=not self.ensure_row_contiguous) for x in inputs]
        out_names = [dtype_name(d) for d in output_dtypes]
        out_types = [codegen.dtype_spelling(n) for n in out_names]
        template = _template_values(template)
        func, text, params = self.generated_source(tensors, out_types, template)
        shown = text + codegen.instantiation(func, template)
        if verbose:
            print(f"Generated source code for `{self.name}`:\n```\n{shown}\n```")
        grid, tg = tuple(int(g) for g in grid), tuple(int(t) for t in threadgroup)
        if len(grid) != 3 or len(tg) != 3 or min(grid + tg) < 1:
            raise ValueError("[metal_kernel] grid and threadgroup must be 3 positive integers.")
        if math.prod(tg) > MAX_THREADS_PER_THREADGROUP:
            raise ValueError(f"[metal_kernel] Threadgroup size {math.prod(tg)} exceeds the "
                             f"maximum of {MAX_THREADS_PER_THREADGROUP} threads per threadgroup.")
        if max(grid) > limits.METAL_MAX_GRID_SIDE:
            raise ValueError(f"[metal_kernel] a grid side of {max(grid)} threads is over "
                             f"{limits.METAL_MAX_GRID_SIDE} (thread_position_in_grid is a uint).")
        for name, shape, dt in zip(self.output_names, output_shapes, out_names, strict=True):
            nbytes = math.prod(shape) * np.dtype(DTYPES[dt][0]).itemsize
            if nbytes > MAX_LAUNCH_BYTES:
                raise ValueError(f"[metal_kernel] output `{name}` of shape {tuple(shape)} needs "
                                 f"{nbytes} bytes, over the simulator's {MAX_LAUNCH_BYTES}")
        problems, pending = self._source_problems()
        if problems:  # refused before anything is compiled
            return SimRun(False, diagnostics=[p.diagnostic() for p in problems], source=shown)
        settings = load_settings()
        tu, vetted, check, regions = self._translation_units(tensors, out_types, template,
                                                             pending)
        vetting = expanded.with_address_spaces(
            expanded.vetting(_CANDIDATE_FILES, "source.metal", vetted, pending),
            _CANDIDATE_FILES, check, settings)
        checked = count or bool(settings.sim_check_set)
        build, mode = build_modes(tu, regions, _SYNC.search(self.header + self.source),
                                  checked=checked, settings=settings, vetting=vetting,
                                  count=count)
        if not build.ok:
            return SimRun(False, diagnostics=build.diagnostics, source=shown, build=build)
        outputs = [poison(tuple(s), n, init_value) for s, n in zip(output_shapes, out_names,
                                                                   strict=True)]
        args = self._buffers(params, tensors, outputs)
        eff = tuple(min(t, g) for t, g in zip(tg, grid, strict=True))
        spec = LaunchSpec(groups=tuple(-(-g // t) for g, t in zip(grid, eff, strict=True)),
                          threadgroup=eff, grid_threads=grid, nonuniform=True,
                          tg_mem_limit=THREADGROUP_MEMORY, checked=checked, count=count)
        result = run_launch(build.library, spec, args, settings, source_file="source.metal")
        run = SimRun(True, findings=result.findings, source=shown, printf=result.printf,
                     build=build, diagnostics=build.diagnostics, kernel_s=result.kernel_s,
                     extents=result.extents, counters=result.counters, mode=mode)
        if result.status == "ok":
            for name, t in zip(self.output_names, outputs, strict=True):
                run.outputs.append(to_mx(Tensor(result.outputs[name], t.dtype)))
        return run

    def _buffers(self, params, tensors: list[Tensor], outputs: list[Tensor]) -> list[BufferArg]:
        by_name = dict(zip(self.input_names, tensors, strict=True))
        outs = dict(zip(self.output_names, outputs, strict=True))
        args = []
        for p in params:
            if p.kind in ("input", "input_ref"):
                args.append(BufferArg(p.name, by_name[p.name].data.reshape(-1), "in"))
                continue
            if p.kind == "output":
                args.append(BufferArg(p.name, outs[p.name].data, "out"))
                continue
            base = by_name[p.name.rsplit("_", 1)[0]]
            if p.kind == "shape":
                data = np.array(base.shape, np.int32)
            elif p.kind == "strides":
                data = np.array(base.strides, np.int64)
            else:
                data = np.array([base.ndim], np.int32)
            args.append(BufferArg(p.name, data, "in"))
        return args

    def __call__(self, **kwargs):
        run = self.launch(**kwargs)
        if not run.compiled:
            log = run.build.log if run.build else ""
            raise CompileError("metal_kernel", self.name, run.diagnostics, log)
        if run.findings or len(run.outputs) != len(self.output_names):
            raise KernelFault("metal_kernel", self.name, run.findings)
        return run.outputs


def metal_kernel(name, input_names, output_names, source, header="", ensure_row_contiguous=True,
                 atomic_outputs=False, compile_options=None) -> MetalKernel:
    """Same signature and semantics as ``mx.fast.metal_kernel`` of MLX 0.32, in metal_sim."""
    return MetalKernel(name, input_names, output_names, source, header, ensure_row_contiguous,
                       atomic_outputs, compile_options)
