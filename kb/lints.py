"""Performance and portability lints for a Metal kernel (an MLX ``metal_kernel`` body and its
header) against the GPU family of one chip (kb/rules/arch/families.toml).

Each lint names the fact it rests on (``sources``: feature ids of kb/rules/arch/features.toml,
i.e. rows of shared/reference/apple-gpu-facts.md). The kernel is read as tree-sitter tokens
(runners.srcrewrite.tokenize), never with regexes. Lints are advice before a build: errors are
what will not compile or run on that family, warnings what runs badly or unsafely there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kb.arch import Family, family, family_of_chip
from kb.tgmem import SizeUnknown, evaluate, template_ints, template_types, threadgroup_decls
from runners.dtypes import dtype_name
from runners.srcrewrite import Tok, tokenize

Severity = Literal["error", "warning", "info"]

# Every lint: its severity and the facts it rests on.
CATALOGUE: dict[str, tuple[Severity, tuple[str, ...]]] = {
    "threadgroup.too_many_threads": ("error", ("F2",)),
    "threadgroup.partial_simdgroup": ("warning", ("F1",)),
    "tgmem.over_limit": ("error", ("F3",)),
    "tgmem.unsized": ("error", ("F3", "mlx-metal-kernel.md §3")),
    "tgmem.unevaluated": ("info", ("F3",)),
    "types.fp64": ("error", ("F11",)),
    "types.bfloat_emulated": ("warning", ("F10",)),
    "atomics.float_threadgroup": ("error", ("F13",)),
    "atomics.half": ("error", ("F14",)),
    "atomics.64bit": ("error", ("F15",)),
    "atomics.64bit_op": ("warning", ("F15",)),
    "atomics.memory_order": ("error", ("F12",)),
    "atomics.fence_order": ("info", ("F12",)),
    "sync.return_before_barrier": ("warning", ("F19",)),
    "sync.spin_wait": ("warning", ("F18",)),
    "simd.shift_fill": ("error", ("F9",)),
    "matrix.not_8x8": ("error", ("F8",)),
    "matrix.tensor_ops": ("warning", ("F20", "F21")),
}
_BARRIERS = {"threadgroup_barrier", "simdgroup_barrier"}
_FP64_TEMPLATE = {"float64", "double"}
_HALF_TYPES = {"half", "bfloat", "float16_t", "bfloat16_t", "float16", "bfloat16"}
_WIDE_TYPES = {"ulong": False, "uint64_t": False, "size_t": False, "long": True, "int64_t": True}
_WIDE_ATOMICS = {"atomic_ulong": "ulong", "atomic_long": "long"}
_NON_MINMAX_OPS = {"atomic_fetch_add_explicit", "atomic_fetch_sub_explicit",
                   "atomic_fetch_and_explicit", "atomic_fetch_or_explicit",
                   "atomic_fetch_xor_explicit", "atomic_exchange_explicit",
                   "atomic_compare_exchange_weak_explicit"}
_STRONG_ORDERS = {"memory_order_acquire", "memory_order_release", "memory_order_acq_rel",
                  "memory_order_seq_cst"}
_SHIFT_FILL = {"simd_shuffle_and_fill_up", "simd_shuffle_and_fill_down",
               "quad_shuffle_and_fill_up", "quad_shuffle_and_fill_down"}
_BFLOAT_TYPES = ({"bfloat", "bfloat16_t", "simdgroup_bfloat8x8"}
                 | {f"{p}bfloat{n}" for p in ("", "packed_") for n in (2, 3, 4)}
                 | {f"bfloat{c}x{r}" for c in (2, 3, 4) for r in (2, 3, 4)})
_TENSOR_OPS = {"matmul2d", "cooperative_tensor", "tensor_ops"}


class Lint(BaseModel):
    """One finding about a kernel: what, how bad, where, and the facts behind it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    severity: Severity
    message: str
    sources: list[str]
    file: str = ""  # source.metal | header.metal, "" for the launch
    line: int = 0

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.line else ""
        return f"{where}{self.severity}: [{self.id}] {self.message} ({', '.join(self.sources)})"


@dataclass(frozen=True)
class Kernel:
    """What the lints look at: tokens per file, launch and template, and the family."""

    files: tuple[tuple[str, tuple[Tok, ...]], ...]  # (name, tokens), header first
    body: str
    template: Mapping[str, object]
    threadgroup: tuple[int, ...] | None
    family: Family


def _lint(lint_id: str, message: str, file: str = "", line: int = 0) -> Lint:
    severity, sources = CATALOGUE[lint_id]
    return Lint(id=lint_id, severity=severity, message=message, sources=list(sources),
                file=file, line=line)


def _tokens(k: Kernel):
    for name, toks in k.files:
        for i, t in enumerate(toks):
            yield name, toks, i, t


def _angle_arg(toks: tuple[Tok, ...], i: int) -> list[str] | None:
    """The tokens between ``<`` and ``>`` after ``toks[i]`` (``atomic<float>`` -> [float])."""
    if i + 1 >= len(toks) or toks[i + 1].text != "<":
        return None
    out, j = [], i + 2
    while j < len(toks) and toks[j].text not in (">", ">>"):
        out.append(toks[j].text)
        j += 1
    return out


def _atomic_element(k: Kernel, toks, i: int) -> str | None:
    """Element type of the atomic type at ``toks[i]`` (template names resolved), else None."""
    t = toks[i].text
    if t in ("atomic_float", "atomic_int", "atomic_uint", "atomic_bool"):
        return t.removeprefix("atomic_")
    if t in _WIDE_ATOMICS:
        return _WIDE_ATOMICS[t]
    arg = _angle_arg(toks, i) if t == "atomic" else None
    if not arg:
        return None
    words = [w for w in arg if w not in ("metal", "::", "const", "volatile")]
    word = words[0] if len(words) == 1 else " ".join(words)
    return template_types(k.template).get(word, word)


def check_threadgroup_size(k: Kernel) -> list[Lint]:
    """Threads per threadgroup over the family maximum, or not a multiple of the SIMD width."""
    if k.threadgroup is None:
        return []
    total, fam = math.prod(k.threadgroup), k.family
    limit, width = fam.max_threads_per_threadgroup.value, fam.simd_width.value
    out = []
    if total > limit:
        out.append(_lint("threadgroup.too_many_threads",
                         f"threadgroup {tuple(k.threadgroup)} has {total} threads, over "
                         f"{fam.name}'s {limit}; pipeline creation (MLX: the launch) fails"))
    if total % width:
        out.append(_lint("threadgroup.partial_simdgroup",
                         f"threadgroup of {total} threads is not a multiple of the SIMD width "
                         f"{width}: the last SIMD-group runs {total % width} of {width} lanes "
                         "(wasted lanes; simd_* collectives see only the active ones)"))
    return out


def check_threadgroup_memory(k: Kernel) -> list[Lint]:
    """Static threadgroup memory of the body against the family limit; sizes that need
    runtime values are reported, never guessed."""
    out, total, sized = [], 0, []
    for d in threadgroup_decls(k.body, k.template):
        if d.nbytes is not None:
            total += d.nbytes
            sized.append(f"{d.name}: {d.nbytes}")
        elif d.why.startswith("an unsized array"):
            out.append(_lint("tgmem.unsized", f"`threadgroup {d.type} {d.name}[]` has no size: "
                             "metal_kernel has no dynamic threadgroup memory; size it with a "
                             "template argument", "source.metal", d.line))
        else:
            dims = "".join(f"[{x}]" for x in d.dims)
            out.append(_lint("tgmem.unevaluated", f"cannot size `threadgroup {d.type} {d.name}"
                             f"{dims}`: {d.why} is unknown here; pass it in `template` to "
                             "check the limit", "source.metal", d.line))
    limit = k.family.threadgroup_memory_bytes.value
    if total > limit:
        out.append(_lint("tgmem.over_limit", f"static threadgroup memory is {total} bytes "
                         f"({', '.join(sized)}), over {k.family.name}'s {limit} bytes "
                         "(static + dynamic); retile or split the kernel"))
    return out


def check_fp64(k: Kernel) -> list[Lint]:
    """``double``, ``long long``, ``long double``, or a float64 template type."""
    out = []
    for name, toks, i, t in _tokens(k):
        nxt = toks[i + 1].text if i + 1 < len(toks) else ""
        prev = toks[i - 1].text if i else ""
        word = ("double" if t.text == "double" and prev != "long" else
                f"long {nxt}" if t.text == "long" and nxt in ("long", "double") else None)
        if word:
            out.append(_lint("types.fp64", f"`{word}`: Apple GPUs have no 64-bit float or "
                             "`long long`; use float (Kahan or two-float sums where precision "
                             "matters) or long/ulong", name, t.line))
    for tname, value in k.template.items():
        if value in _FP64_TEMPLATE:
            out.append(_lint("types.fp64", f"template `{tname}` = {value}: MLX spells it "
                             "`double`, which Metal does not have"))
    return out


def check_bfloat(k: Kernel) -> list[Lint]:
    """bfloat math on a family without bf16 ALUs (one lint per kernel)."""
    if k.family.bfloat.value != "emulated":
        return []
    hit = next(((name, t.line, f"`{t.text}`") for name, _, _, t in _tokens(k)
                if t.text in _BFLOAT_TYPES), None)
    if hit is None:
        names = [n for n, v in k.template.items() if v in ("bfloat16", "bfloat16_t", "bfloat")]
        if not names:
            return []
        hit = ("", 0, f"template `{names[0]}`")
    return [_lint("types.bfloat_emulated", f"{hit[2]}: {k.family.name} has no bf16 ALUs, so "
                  "bfloat math goes through FP32 (much slower than half); store bfloat but "
                  "compute in float or half", hit[0], hit[1])]


def check_atomic_types(k: Kernel) -> list[Lint]:
    """Float atomics in threadgroup memory, half/bfloat atomics, 64-bit atomics the family
    lacks."""
    out, calls = [], {t.text for _, _, _, t in _tokens(k)}
    fam, wide = k.family, k.family.atomic_64bit.value
    for name, toks, i, t in _tokens(k):
        elem = _atomic_element(k, toks, i)
        if elem is None:
            continue
        spelled = f"atomic<{elem}>" if t.text == "atomic" else t.text
        if elem == "float" and not fam.atomic_float_threadgroup.value and _in_threadgroup(toks, i):
            out.append(_lint("atomics.float_threadgroup", f"`threadgroup {spelled}`: float "
                             "atomics exist only in device memory; reduce with simd_sum and one "
                             "device atomic, or CAS on a threadgroup atomic_uint", name, t.line))
        if elem in _HALF_TYPES:
            out.append(_lint("atomics.half", f"`{spelled}`: Metal has no half/bfloat atomics; "
                             "pack two into a 32-bit CAS loop (guard it against NaN)",
                             name, t.line))
        if elem in _WIDE_TYPES and wide != "all":
            if wide == "none" or _WIDE_TYPES[elem]:
                have = "no 64-bit atomics" if wide == "none" else "only ulong min/max"
                out.append(_lint("atomics.64bit", f"`{spelled}`: {fam.name} has {have}; "
                                 "redesign around 32-bit atomics", name, t.line))
            elif ops := sorted(calls & _NON_MINMAX_OPS):
                out.append(_lint("atomics.64bit_op", f"`{spelled}` with {', '.join(ops)}: "
                                 f"{fam.name} has only ulong min/max as 64-bit atomics",
                                 name, t.line))
    return out


def _in_threadgroup(toks, i: int) -> bool:
    j = i - 1
    while j >= 0 and toks[j].text in ("metal", "::", "volatile", "const"):
        j -= 1
    return j >= 0 and toks[j].text == "threadgroup"


def check_calls(k: Kernel) -> list[Lint]:
    """Memory orders other than relaxed, shift-and-fill the family lacks, spin-waits,
    non-8x8 simdgroup matrices and Metal 4 tensor ops off Apple10."""
    out = []
    for name, toks, i, t in _tokens(k):
        if t.text in _STRONG_ORDERS:
            if _enclosing_call(toks, i) == "atomic_thread_fence":
                out.append(_lint("atomics.fence_order", f"`atomic_thread_fence(..., {t.text})` "
                                 "needs MSL 3.2 (macOS 15)", name, t.line))
            else:
                out.append(_lint("atomics.memory_order", f"`{t.text}`: Metal atomic "
                                 "read-modify-writes take memory_order_relaxed only; put "
                                 "ordering in a barrier or a kernel boundary", name, t.line))
        elif t.text in _SHIFT_FILL and not k.family.simd_shift_fill.value:
            out.append(_lint("simd.shift_fill", f"`{t.text}` needs Apple8+ (MSL 2.4); "
                             f"{k.family.name} lacks it: use simd_shuffle_up/down plus a "
                             "select", name, t.line))
        elif t.text == "while" and "atomic_load_explicit" in _paren_words(toks, i + 1):
            out.append(_lint("sync.spin_wait", "a while loop spins on an atomic load: Metal "
                             "promises no progress across threadgroups (or lanes of one "
                             "SIMD-group), so this can hang; split into two dispatches",
                             name, t.line))
        elif t.text == "simdgroup_matrix" and (dims := _matrix_dims(k, toks, i)) != (8, 8):
            if dims is not None:
                out.append(_lint("matrix.not_8x8", f"`simdgroup_matrix` {dims[0]}x{dims[1]}: "
                                 "only 8x8 exists; tile a 16x16 fragment as 2x2 8x8 matrices",
                                 name, t.line))
        elif t.text in _TENSOR_OPS and not k.family.mma_16x16.value:
            out.append(_lint("matrix.tensor_ops", f"`{t.text}` (Metal 4 tensor ops) needs "
                             f"macOS 26 + MSL 4 and is fast only on Apple10 (M5); on "
                             f"{k.family.name} keep a simdgroup_matrix path", name, t.line))
    return out


def check_barriers(k: Kernel) -> list[Lint]:
    """A ``return`` in the body ahead of a barrier: threads that leave never arrive."""
    toks = dict(k.files).get("source.metal", ())
    first_return = next((t for t in toks if t.text == "return"), None)
    if first_return and any(t.text in _BARRIERS and t.start > first_return.start for t in toks):
        return [_lint("sync.return_before_barrier", "`return` before a barrier: unless its "
                      "condition is the same for the whole threadgroup, the threads that return "
                      "never reach the barrier, and every thread must; mask the work instead",
                      "source.metal", first_return.line)]
    return []


def _enclosing_call(toks, i: int) -> str | None:
    depth = 0
    for j in range(i - 1, -1, -1):
        if toks[j].text == ")":
            depth += 1
        elif toks[j].text == "(":
            if depth == 0:
                return toks[j - 1].text if j else None
            depth -= 1
    return None


def _paren_words(toks, i: int) -> set[str]:
    if i >= len(toks) or toks[i].text != "(":
        return set()
    depth, words = 0, set()
    for t in toks[i:]:
        depth += {"(": 1, ")": -1}.get(t.text, 0)
        words.add(t.text)
        if depth == 0:
            break
    return words


def _matrix_dims(k: Kernel, toks, i: int) -> tuple[int, int] | None:
    arg = _angle_arg(toks, i)
    if not arg or arg.count(",") != 2:
        return None
    first, second = arg.index(","), len(arg) - 1 - arg[::-1].index(",")
    try:
        values = template_ints(k.template)
        return evaluate(arg[first + 1:second], values), evaluate(arg[second + 1:], values)
    except SizeUnknown:
        return None


CHECKS: tuple[Callable[[Kernel], list[Lint]], ...] = (
    check_threadgroup_size, check_threadgroup_memory, check_fp64, check_bfloat,
    check_atomic_types, check_calls, check_barriers)


def resolve_family(chip: str) -> Family:
    """The family of a chip name ("M2 Max") or a family name ("Apple9"); ArchError otherwise."""
    return family(chip) if chip.lower().startswith("apple") else family_of_chip(chip)


def lint_metal(body: str, header: str = "", *, threadgroup: tuple[int, int, int] | None = None,
               template: Mapping[str, object] | None = None, chip: str = "M1") -> list[Lint]:
    """Lints of a metal_kernel ``body`` (+ ``header``) launched with ``threadgroup`` and
    ``template`` values (int, bool, an mx.Dtype or its name, e.g. "float16") on ``chip``, errors
    first. Raises ArchError for an unknown chip."""
    files = (("header.metal", tuple(tokenize(header))), ("source.metal", tuple(tokenize(body))))
    tg = tuple(int(x) for x in threadgroup) if threadgroup is not None else None
    values = {n: v if isinstance(v, (bool, int, str)) else dtype_name(v)  # an mx.Dtype
              for n, v in (template or {}).items()}
    k = Kernel(files, body, values, tg, resolve_family(chip))
    found: dict[tuple[str, str, int], Lint] = {}
    for check in CHECKS:
        for lint in check(k):
            found.setdefault((lint.id, lint.file, lint.line), lint)  # one per id and line
    rank = {"error": 0, "warning": 1, "info": 2}
    return sorted(found.values(), key=lambda x: rank[x.severity])
