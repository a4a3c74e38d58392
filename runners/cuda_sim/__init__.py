"""cuda_sim: run CUDA kernels on any machine, with CuPy's RawKernel/RawModule surface.

``RawKernel(code, name)(grid, block, args, shared_mem=0)`` with numpy arrays as device buffers
(written in place) and numpy scalars (``np.int32(n)``) as values. The original CUDA kernel run
here is kport's correctness oracle. Faults raise KernelFault; ``.launch(...)`` returns a record.
Callers outside runners/ get it as ``runners.get("cuda_sim")`` (RUNNER, at the end).
"""

from __future__ import annotations

import functools
import re
import sys
import tomllib
import zlib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runners import conditionals, limits, ptx, srcrewrite, workitems
from runners.base import Runner
from runners.settings import load_settings
from runners.simbuild import SIMCORE, Diagnostic, Vetting, build_modes, kernel_tail
from runners.simfaults import CompileError, KernelFault
from runners.simhost import BufferArg, LaunchSpec, ScalarArg, SimRecord, launch_dims, run_launch
from runners.structs import WithPointers

STATIC_SHARED_LIMIT = limits.CUDA_STATIC_SHARED
# Calls that need the fiber scheduler (a rendezvous of a warp or block).
_GROUP_BUILTINS = frozenset({"blockIdx", "blockDim", "gridDim", "warpSize"})  # one per block
_SYNC = re.compile(r"\b(__syncthreads\w*|__syncwarp|__shfl\w*|__ballot_sync|__any_sync|"
                   r"__activemask|__all_sync|__reduce_\w+_sync|__match_\w+_sync|"
                   r"cooperative_groups|this_thread_block|tiled_partition|load_matrix_sync|"
                   r"store_matrix_sync|mma_sync|cub)\b")

__all__ = ["RUNNER", "CudaRun", "KernelFault", "CompileError", "RawKernel", "RawModule"]


@functools.lru_cache(maxsize=1)
def _unsupported() -> list[dict]:
    path = SIMCORE / "cuda_unsupported.toml"
    if not path.is_file():
        return []
    data = tomllib.loads(path.read_text())
    return list(data.get("construct", data.get("constructs", [])))


def parameter_names(code: str, kernel: str) -> list[str]:
    """Names of the parameters of ``__global__`` function ``kernel`` (template args ignored), or
    [] when it cannot be found; used to name buffers in findings."""
    return list(_parameter_names(code, kernel))


@functools.lru_cache(maxsize=32)  # every launch of a kernel asks
def _parameter_names(code: str, kernel: str) -> tuple[str, ...]:
    base = kernel.split("<")[0].split("::")[-1].strip()
    parts = srcrewrite.function_params(srcrewrite.tokenize(code), base, "__global__")
    if parts is None:
        return ()
    def name(param: list) -> str:  # `const uint3 off = make_uint3(0, 0, 0)`: off
        ends = [i for i, x in enumerate(param) if x.text == "="]
        declared = param[:ends[0]] if ends else param
        return next((x.text for x in reversed(declared) if x.kind == "identifier"), "")

    return tuple(name(p) for p in parts)


@dataclass(frozen=True)
class Unsupported:
    """A construct cuda_sim cannot model, where its file has it (``check``: for
    conditionals.split, which decides whether it waits for the compiler's verdict)."""

    file: str
    line: int
    message: str
    check: str = "construct"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


def unsupported_constructs(texts: dict[str, str]) -> list[Unsupported]:
    """Every construct of cuda_unsupported.toml in each file of ``texts`` (name -> text, as
    written), with that file's own line numbers."""
    table, found = _unsupported(), []
    tokens = {file: srcrewrite.tokenize(text) for file, text in texts.items()}
    used = Counter(t.text for toks in tokens.values() for t in toks if t.kind == "identifier")
    for file, text in texts.items():
        # inline PTX kport lowers (runners/ptx.py) is supported; the rest is named
        lowering = ptx.lower_source(text)
        unlowered = {line: (what, why) for line, what, why in lowering.unknown}
        toks = tokens[file]
        for i, tok in enumerate(toks):
            if tok.kind == "preproc_arg" and re.search(r"\b(asm|__asm__|__asm)\b", tok.text):
                define = max((k for k in range(max(0, i - 40), i) if toks[k].text == "#define"),
                             default=i - 1)
                name = toks[define + 1].text
                if used[name] < 2:  # only its definition names it: the macro is never used
                    continue
                found.append(Unsupported(file, tok.line, (
                    "inline PTX assembly in a macro's body is not supported by cuda_sim (kport "
                    "lowers asm statements it can read, not macro text); write the asm where "
                    "the macro is used, or the CUDA intrinsic it implements")))
                continue
            if tok.text in ptx.ASM_WORDS:
                if tok.line not in lowering.lines:
                    what, why = unlowered.get(tok.line, (tok.text, "not an asm statement kport "
                                                         "reads, as in a macro's body"))
                    found.append(Unsupported(file, tok.line, (
                        f"inline PTX assembly `{what}` is not supported by cuda_sim ({why}); "
                        "docs/fidelity.md \"Inline PTX\" lists the instructions kport lowers: "
                        "replace the asm block with the CUDA intrinsic or plain C++ it "
                        "implements")))
                continue
            for entry in table:
                if tok.text in entry.get("identifiers", ()):
                    found.append(Unsupported(file, tok.line, (
                        f"{entry['construct']} (`{tok.text}`) is not supported by cuda_sim; "
                        f"{entry.get('hint', '')}").rstrip("; ")))
    return found


def _wait_on_include(found: Unsupported, includers: dict[str, tuple[str, int]],
                     pending: conditionals.Pending) -> bool:
    """Whether ``found``, outside every group of its own file, sits in a header included from
    inside an ``#if`` group (llama.cpp includes vendors/hip.h under `#if defined(GGML_USE_HIP)`):
    then it waits, in ``pending``, on the innermost such group up the chain of includes."""
    file, seen = found.file, set()
    while file in includers and file not in seen:
        seen.add(file)
        parent, line = includers[file]
        group = conditionals.innermost(pending.groups[parent], line)
        if group is not None:
            pending.waiting.setdefault(parent, []).append((found, group.id, False))
            return True
        file = parent
    return False


def _vetting(tu: str, pending: conditionals.Pending) -> Vetting:
    """The constructs waiting in ``#if`` groups, decided on ``tu`` (the kernel's TU with the
    groups' markers) as clang preprocesses it: those in groups it reads fail the build, at
    their own file and line."""
    def preprocessed(text: str) -> list[Diagnostic]:
        found, _ = pending.resolve(text)
        return [Diagnostic(u.file, u.line, 0, "error", u.message) for u in found]

    return Vetting(conditionals.nonce(pending.key, "cuda"), tu, preprocessed, lambda lib: [])


CudaRun = SimRecord  # what RawKernel.launch returns


CUDA_HEAD = "#include <kport/rt.h>\n#include <kport/cuda_runtime.h>\n"  # every CUDA TU's start
# Unpacks the argument slots into the kernel's own parameter types (deduced from its pointer).
_INVOKE = """template <class __KpT, __KpT... __KpI> struct __kp_seq {};
template <class __KpT> struct __kp_noref { using type = __KpT; };
template <class __KpT> struct __kp_noref<__KpT&> { using type = __KpT; };
// Scalars and pointers are read from kport's slots through __KP_RT (unchecked); class and
// reference parameters bind to the slot itself.
template <class __KpA>
static inline __attribute__((always_inline)) decltype(auto) __kp_arg(void* __kp_p) {
  using __KpT = typename __kp_noref<__KpA>::type;
  if constexpr (__is_scalar(__KpA)) return (__KpT)*(const __KpT __KP_RT*)__kp_p;
  else return *(__KpT*)__kp_p;
}
template <class... __KpA, unsigned... __KpI>
static inline __attribute__((always_inline)) void __kp_call(
    void (*__kp_f)(__KpA...), void** __kp_a, __kp_seq<unsigned, __KpI...>) {
  __kp_f(__kp_arg<__KpA>(((void* __KP_RT*)__kp_a)[__KpI])...);
}
template <class... __KpA>
static inline __attribute__((always_inline)) void __kp_invoke(void (*__kp_f)(__KpA...),
                                                              void** __kp_a) {
  __kp_call(__kp_f, __kp_a, __make_integer_seq<__kp_seq, unsigned, sizeof...(__KpA)>{});
}
"""


# RawKernel._units of the kernels launched last, least recently used first.
_UNITS: OrderedDict[tuple, tuple[str, Vetting | None, str, str | None]] = OrderedDict()
_UNITS_KEPT = 32


class RawKernel:
    """One ``__global__`` function of ``code`` (``name`` may carry template arguments)."""

    def __init__(self, code: str, name: str, options=(), *, filename: str = "kernel.cu"):
        self.code, self.name, self.options, self.filename = code, name, tuple(options), filename

    def _source(self, edit=None, texts: dict[str, str] | None = None,
                includers: dict[str, tuple[str, int]] | None = None) -> str:
        """The code with the local headers it includes inlined (``edit(name, text)`` applied
        to each file first; ``texts`` collects each file as written, ``includers`` the file
        and line that first include each header)."""
        return inlined_source(self.code, self.filename, self.options, edit=edit, texts=texts,
                              includers=includers)

    def _prepared(self) -> tuple[str, Vetting | None]:
        """(the source to compile, the vetting of the unsupported constructs that wait for the
        compiler): one outside every ``#if`` group raises SourceError at its file and line at
        once; one inside a group counts only if clang reads that group (conditionals.py), so
        code for another platform (HIP's inline asm in llama.cpp's common.cuh) does not refuse
        a kernel. The clearest error there is, so it comes first."""
        return self._prepared_from(*self._read())

    def _read(self) -> tuple[str, dict[str, str], dict[str, tuple[str, int]]]:
        """(the inlined source, each file as written, the includer of each header)."""
        texts: dict[str, str] = {}
        includers: dict[str, tuple[str, int]] = {}
        return self._source(texts=texts, includers=includers), texts, includers

    def _prepared_from(self, code: str, texts: dict[str, str],
                       includers: dict[str, tuple[str, int]]) -> tuple[str, Vetting | None]:
        now, pending = conditionals.split(unsupported_constructs(texts), texts)
        now = [u for u in now if not _wait_on_include(u, includers, pending)]
        if now:
            raise srcrewrite.SourceError(str(now[0]))
        if not pending:
            return code, None
        return code, _vetting(self._translation_unit(self._source(edit=pending.mark)), pending)

    @staticmethod
    def _rewritten(code: str) -> str:
        code = ptx.lower_source(code).source  # what is not lowered was refused above
        code = srcrewrite.rewrite_group_storage(code, "__shared__")
        return srcrewrite.rewrite_cuda_vector_casts(code)

    def _translation_unit(self, code: str | None = None, formed: str | None = None) -> str:
        """The TU to compile; with ``formed`` (the rewritten code in work-item loops), that."""
        code = self._prepared()[0] if code is None else code
        regions = formed is not None
        code = formed if regions else self._rewritten(code)
        defines = "".join(f"#define {name} {value}\n" for name, value in
                          macro_definitions(self.options))
        if re.search(r"\bcub\s*::", code):  # a device-code closure keeps no system include:
            defines += "#include <cub/cub.cuh>\n"  # CUB's collectives are kport's own here
        if re.search(r"\bcooperative_groups\b", code):  # nor <cooperative_groups.h>
            defines += "#include <cooperative_groups.h>\n"
        if re.search(r"\bc10\s*::\s*complex\b", code):  # torch's, as device code uses it
            defines += "#include <c10/util/complex.h>\n"
        head = "#define __KP_WI_TU 1\n" if regions else ""  # kport/cuda_runtime.h
        return (f'{head}{CUDA_HEAD}{defines}#line 1 "{self.filename}"\n{code}\n'
                + kernel_tail("cuda", bool(_SYNC.search(code)) and not regions, _INVOKE,
                              f"  __kp_invoke(&{self.name}, __kp_a);", regions=regions))

    def _work_items(self, code: str) -> str | None:
        """The TU with the kernel in work-item loops (runners/workitems.py), or None where it
        keeps fibers (a warp function, cooperative groups, CUB, a barrier it cannot place)."""
        rewritten = self._rewritten(code)  # PTX lowered: `shfl.sync` is a warp function
        if {m[0] for m in _SYNC.finditer(rewritten)} - {"__syncthreads"}:
            return None
        try:
            formed = workitems.form_regions(
                rewritten, self.name.split("<")[0].strip(), language="cuda",
                barrier="__syncthreads", uniform=_GROUP_BUILTINS, varying={},
                per_thread=frozenset({"threadIdx"}))
        except workitems.NotFormed:
            return None
        return self._translation_unit(code, formed=formed)

    def _units(self) -> tuple[str, Vetting | None, str, str | None]:
        """(the prepared source, its vetting, the TU, the TU in work-item loops or None),
        kept for the kernel's next launch (other sizes, a benchmark's repetitions): they are a
        function of the files as read now, the name and the options, and take ~0.1 s to make."""
        read = self._read()
        key = (self.name, self.filename, self.options, read[0], tuple(read[1].items()))
        if (units := _UNITS.get(key)) is None:
            code, vetting = self._prepared_from(*read)
            units = (code, vetting, self._translation_unit(code), self._work_items(code))
            _UNITS[key] = units
            while len(_UNITS) > _UNITS_KEPT:
                _UNITS.pop(next(iter(_UNITS)))
        else:
            _UNITS.move_to_end(key)
        return units

    def launch(self, grid, block, args, shared_mem: int = 0, *, count: bool = False) -> CudaRun:
        """Run once; numpy array arguments are updated in place. Returns a CudaRun record;
        ``count``: a checked run that also fills its ``counters`` (runners/perf)."""
        code, vetting, tu, regions = self._units()
        grid, block = launch_dims(grid, "grid"), launch_dims(block, "block")
        try:  # CUDA refuses such a launch (cudaErrorInvalidConfiguration); so does CuPy
            limits.check_cuda_launch(grid, block, "launch", shared_mem)
        except limits.InputError as err:
            raise ValueError(str(err)) from None
        launch_args, arrays = [], {}
        names = parameter_names(self.code, self.name)
        if names and len(names) != len(args):
            raise ValueError(f"kernel `{self.name}` takes {len(names)} arguments "
                             f"({', '.join(names)}), got {len(args)}")
        for i, value in enumerate(args):
            label = names[i] if i < len(names) and names[i] else f"arg{i}"
            if isinstance(value, np.ndarray):
                if any(value is other for other in arrays.values()):
                    raise ValueError(f"argument {i}: the same array is passed twice; aliased "
                                     "buffers are not supported by cuda_sim yet")
                if not value.flags.c_contiguous:
                    raise ValueError(f"argument {i}: pass a C-contiguous array")
                if label in arrays:
                    label = f"{label}_{i}"
                launch_args.append(BufferArg(label, value, "inout"))
                arrays[label] = value
            elif isinstance(value, np.generic):
                launch_args.append(ScalarArg(label, value.tobytes()))
            elif isinstance(value, WithPointers):  # a struct whose pointer fields hold arrays
                pointers = []
                for path, (offset, array) in value.arrays.items():
                    if array is None:
                        continue  # nullptr: the struct's bytes keep their zero
                    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
                        raise ValueError(f"argument {i}: field {path}: pass a C-contiguous "
                                         "numpy array")
                    if any(array is other for other in arrays.values()):
                        raise ValueError(f"argument {i}: field {path}: the same array is "
                                         "passed twice; aliased buffers are not supported by "
                                         "cuda_sim yet")
                    target = f"{label}.{path}"
                    launch_args.append(BufferArg(target, array, "inout", detached=True))
                    arrays[target] = array
                    pointers.append((offset, target))
                launch_args.append(ScalarArg(label, value.value.tobytes(), tuple(pointers)))
            else:
                raise TypeError(f"argument {i}: pass numpy arrays for buffers, numpy scalars "
                                "(e.g. np.int32(n)) for values and runners.structs.WithPointers "
                                "for a struct with pointer fields, not "
                                f"{type(value).__name__}")
        settings = load_settings()
        checked = count or bool(settings.sim_check_set)
        build, mode = build_modes(tu, regions, bool(_SYNC.search(code)),
                                  checked=checked, dialect="cuda", settings=settings,
                                  vetting=vetting, count=count)
        if not build.ok:
            return CudaRun(False, diagnostics=build.diagnostics, source=self.code, build=build)
        spec = LaunchSpec(groups=grid, threadgroup=block,
                          grid_threads=tuple(g * b for g, b in zip(grid, block, strict=True)),
                          nonuniform=False, tg_mem_limit=STATIC_SHARED_LIMIT,
                          dyn_smem=int(shared_mem), checked=checked, count=count)
        result = run_launch(build.library, spec, launch_args, settings,
                            source_file=self.filename)
        for name, array in arrays.items():
            if name in result.outputs:
                array[...] = result.outputs[name]
        return CudaRun(True, findings=result.findings, diagnostics=build.diagnostics,
                       outputs=list(arrays.values()) if result.status == "ok" else [],
                       printf=result.printf, source=self.code, kernel_s=result.kernel_s,
                       build=build, extents=result.extents, counters=result.counters,
                       mode=mode)

    def __call__(self, grid, block, args, *, shared_mem: int = 0) -> None:
        run = self.launch(grid, block, args, shared_mem)
        if not run.compiled:
            raise CompileError("cuda_sim", self.name, run.diagnostics,
                               run.build.log if run.build else "")
        if run.printf:
            sys.stdout.write(run.printf)
        if run.findings:
            raise KernelFault("cuda_sim", self.name, run.findings)


class RawModule:
    """CuPy's RawModule: ``get_function(name_or_expression)`` returns a RawKernel."""

    def __init__(self, code: str, options=(), name_expressions=None, *,
                 filename: str = "kernel.cu"):
        self.code, self.options, self.filename = code, tuple(options), filename
        self.name_expressions = list(name_expressions or [])

    def get_function(self, name: str) -> RawKernel:
        if "<" in name and self.name_expressions and name not in self.name_expressions:
            raise ValueError(f"{name!r} is not among name_expressions {self.name_expressions}")
        return RawKernel(self.code, name, self.options, filename=self.filename)


def include_dirs(options) -> list[str]:
    """Folders of ``-Idir``, ``-I dir``, ``--include-path=dir`` and ``--include-path dir``
    (NVRTC/CuPy spellings); other options are ignored, as the simulator needs none of them."""
    options, found = list(options), []
    for i, opt in enumerate(options):
        nxt = options[i + 1] if i + 1 < len(options) else None
        if opt in ("-I", "--include-path") and nxt:
            found.append(nxt)
        elif opt.startswith("--include-path="):
            found.append(opt.split("=", 1)[1])
        elif opt.startswith("-I") and len(opt) > 2:
            found.append(opt[2:])
    return found


def macro_definitions(options) -> list[tuple[str, str]]:
    """(name, value) of each ``-DNAME[=V]``, ``-D NAME[=V]``, ``--define-macro=NAME[=V]`` and
    ``--define-macro NAME[=V]`` (NVRTC/CuPy spellings; nvcc's value 1 when none is given);
    ValueError for a name that is not an identifier or a value that spans lines."""
    options, found = list(options), []
    for i, opt in enumerate(options):
        nxt = options[i + 1] if i + 1 < len(options) else None
        if opt in ("-D", "--define-macro") and nxt:
            spec = nxt
        elif opt.startswith("--define-macro="):
            spec = opt.split("=", 1)[1]
        elif opt.startswith("-D") and len(opt) > 2:
            spec = opt[2:]
        else:
            continue
        name, eq, value = spec.partition("=")
        if not re.fullmatch(r"[A-Za-z_]\w*", name) or "\n" in value or "\\" in value:
            raise ValueError(f"-D {spec!r}: write NAME or NAME=VALUE, NAME an identifier and "
                             "VALUE on one line")
        found.append((name, value if eq else "1"))
    return found


def inlined_source(code: str, filename: str, options=(), *, edit=None,
                   texts: dict[str, str] | None = None,
                   includers: dict[str, tuple[str, int]] | None = None) -> str:
    """``code`` (the file ``filename``) with the local headers it includes inlined, each
    found as nvcc finds it: in the including file's folder, then in each ``-I`` folder of
    ``options`` in order (``_inline_includes``). ``edit(name, text)`` changes each file first;
    ``texts`` collects each file as written, ``includers`` the file and line that first
    include each header."""
    edit = edit or (lambda name, text: text)
    if texts is not None:
        texts[filename] = code
    search = [Path(folder).resolve() for folder in include_dirs(options)]
    if not search:
        return edit(filename, code)
    return _inline_includes(edit(filename, code), search[0], filename, search=search,
                            edit=edit, texts=texts, includers=includers, once={})


# An include of a local header; a comment may follow it (`#include "x.cuh"  // why`).
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[ \t]*(?://.*|/\*.*\*/[ \t]*)?$')
_LINE = re.compile(r"^#line (\d+)$")  # what conditionals.marked adds: a number, no file
_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once\b", re.M)
_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b")


def _find_header(name: str, here: Path, search: list[Path]) -> Path | None:
    """The file ``#include "name"`` in a file of folder ``here`` reads: ``here`` first, then
    each folder of ``search``; only a file inside one of the ``search`` folders, never an
    absolute path, a ``..`` or a link that leads out of them: the source is outside code, and
    whatever is inlined reaches the compiler's messages."""
    if Path(name).is_absolute():
        return None
    for folder in (here, *search):
        path = (folder / name).resolve()
        if path.is_file() and any(path.is_relative_to(root) for root in search):
            return path
    return None


def _inline_includes(code: str, folder: Path, filename: str, *, search: list[Path], edit,
                     texts: dict[str, str] | None, includers: dict[str, tuple[str, int]] | None,
                     once: dict[Path, bool], seen: frozenset = frozenset(),
                     guarded: bool = False) -> str:
    """``code`` (the file ``filename`` in ``folder``) with each ``#include "x"`` that
    _find_header finds replaced by that file's text, inlined in turn, between #line
    directives that keep diagnostics in the right file and line (so the build cache sees the
    content). ``edit`` as in inlined_source (a bare ``#line N`` it adds renumbers, as the
    compiler would); a header already open (``seen``) is left as an include. A header with
    ``#pragma once`` is wrapped in a guard macro, as the compiler treats it; once inlined
    outside every ``#if`` group (``once[path]`` True) a later include is left out, but one
    first inlined inside a group (``guarded``: here or up the chain of includes) is inlined
    again, guarded, for the group may be one the compiler skips (vLLM's amd/ headers include
    dtype_fp8.cuh under `#ifdef USE_ROCM` before its nvidia branch does)."""
    out, number, depth = [], 0, 0
    for line in code.split("\n"):
        number += 1
        if m := _LINE.match(line):
            number = int(m[1]) - 1
        if d := _CONDITIONAL.match(line):
            depth += 1 if d[1].startswith("if") else -1 if d[1] == "endif" else 0
        m = _INCLUDE.match(line)
        path = _find_header(m[1], folder, search) if m else None
        if path is not None and once.get(path):
            out.append("")
            continue
        if path is None or path in seen:
            out.append(line)
            continue
        text = path.read_text(errors="replace")
        inside = guarded or depth > 0
        guard = f"__KP_ONCE_{zlib.crc32(str(path).encode()):08x}" if _ONCE.search(text) else ""
        if guard:
            once[path] = once.get(path, False) or not inside
        if texts is not None:
            texts.setdefault(m[1], text)
        if includers is not None:
            includers.setdefault(m[1], (filename, number))
        body = _inline_includes(edit(m[1], text), path.parent, m[1], search=search, edit=edit,
                                texts=texts, includers=includers, once=once,
                                seen=seen | {path}, guarded=inside)
        head, tail = (f"#ifndef {guard}\n#define {guard}\n", "\n#endif") if guard else ("", "")
        out.append(f'{head}#line 1 "{m[1]}"\n{body}{tail}\n#line {number + 1} "{filename}"')
    return "\n".join(out)


RUNNER = Runner("cuda_sim", "cuda", hardware=False, kernel=RawKernel)
