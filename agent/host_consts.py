"""What a host launch names that only the instantiation or the compiler says (issue 15).

causal-conv1d's ``causal_conv1d_fwd_launch<kNThreads, kWidth, input_t, weight_t>`` launches
``causal_conv1d_fwd_kernel<Ktraits>`` with ``using Ktraits =
Causal_conv1d_fwd_kernel_traits<kNThreads, kWidth, kIsVecLoad, input_t, weight_t>`` and
``Ktraits::kSmemSize`` bytes of dynamic shared memory. The user names the kernel's
instantiation (``causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, float,
float>>``): matched position by position against the launched template-id, it binds the host's
own template parameters (``kNThreads = 128`` ...: ``bind_template``). ``Ktraits::kSmemSize``
(CUB's temp storage sizes behind it) is then compiled with the kernel's device code in cuda_sim
and read back (``constant_compiler``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import runners
from agent.translate.macros import split_template_args
from runners.errors import KportError
from runners.sizeexpr import ONE_ARG_FUNCTIONS, SizeExprError, evaluate

_TEMPLATE_ID = re.compile(r"^\s*((?:[A-Za-z_]\w*\s*::\s*)*[A-Za-z_]\w*)\s*<(.*)>\s*$", re.S)
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


def bind_template(launched: list[str], given: list[str], bindable: set[str],
                  fold: Callable[[str], object]) -> tuple[dict[str, str], list[bool | None]]:
    """(the values that make the launched template arguments equal the ``given`` ones, a
    verdict per launched argument: True equal under them, False different, None cannot
    tell). A name of ``bindable`` (the host's template parameters, a switch macro's constant)
    takes the given text at its position, a template-id matches one of the same name part by
    part; ``fold(text)`` gives another argument's constant value (None when it has none),
    else its text must equal the given one."""
    bound: dict[str, str] = {}
    verdicts = [_unify(a, g, bindable, fold, bound) for a, g in
                zip(launched, given, strict=False)]
    return bound, verdicts + [None] * (len(launched) - len(verdicts))


def _unify(mine: str, theirs: str, bindable: set[str], fold, bound: dict) -> bool | None:
    mine, theirs = " ".join(mine.split()), " ".join(theirs.split())
    if _IDENT.match(mine) and mine in bindable:
        if mine in bound:
            return _equal(bound[mine], theirs, fold)
        bound[mine] = theirs
        return True
    a, b = _TEMPLATE_ID.match(mine), _TEMPLATE_ID.match(theirs)
    if a and b:
        if a[1].split("::")[-1].strip() != b[1].split("::")[-1].strip():
            return False
        parts, others = split_template_args(a[2]), split_template_args(b[2])
        if len(parts) != len(others):
            return None  # default arguments left out on one side
        verdicts = [_unify(p, o, bindable, fold, bound) for p, o in zip(parts, others,
                                                                         strict=True)]
        return False if False in verdicts else None if None in verdicts else True
    if mine == theirs:
        return True
    value = fold(mine)
    if value is not None:
        return _equal(str(value).lower() if isinstance(value, bool) else str(value), theirs,
                      fold)
    if re.search(r"[A-Za-z_]\w*", mine):
        # over a host parameter, or a local kport cannot fold (llama.cpp's `kNC =
        # decltype(NC)::value` in a dispatch lambda): not solved for, so any value
        return None
    return None if a or b else False


def _equal(a: str, b: str, fold) -> bool:
    if a == b:
        return True
    x, y = fold(a), fold(b)
    return x is not None and x == y


def constant_compiler(code: str, filename: str) -> HostCompiler:
    """A HostCompiler over ``code`` (a kernel's device code, as cuda_closure writes it)."""
    return HostCompiler(code, filename)


# The arguments a host helper is compared with a size function at: every small size, and each
# power of two up to 2**30 with its neighbours, where rounding helpers change value (not past
# 2**30: an int helper that doubles would overflow, and may never return)
HELPER_PROBES = sorted({*range(1, 1025), *((1 << k) + d for k in range(10, 31)
                                            for d in (-1, 0, 1))} - {(1 << 30) + 1})


class HostCompiler:
    """What the host code computes that only a compiler says, compiled with the kernel's device
    code in cuda_sim and run once (memoized): called with a C++ integral constant expression over
    the types and constants of the code, its value (``Ktraits::kSmemSize``), ValueError with
    the compiler's first diagnostic when it does not compile or is no constant;
    ``size_function`` reads a host helper of one integer as a size function."""

    def __init__(self, code: str, filename: str) -> None:
        self.code, self.filename = code, filename
        self._known: dict[str, int | str] = {}

    def __call__(self, expr: str) -> int:
        if expr not in self._known:
            probe = (f"{self.code}\n__global__ void kp_host_constant(long long *kp_out) {{\n"
                     f"    constexpr long long kp_value = (long long)({expr});\n"
                     "    kp_out[0] = kp_value;\n}\n")
            out = np.zeros(1, np.int64)
            why = self._run(probe, "kp_host_constant", [out])
            self._known[expr] = why or int(out[0])
        if isinstance(self._known[expr], str):
            raise ValueError(self._known[expr])
        return self._known[expr]

    def size_function(self, name: str, definition: str) -> str:
        """The size function of runners/sizeexpr.py (``next_pow2``) that host helper ``name``
        (``definition``: its C++ text; a helper of one integer parameter, such as llama.cpp's
        ``next_power_of_2``) computes: it runs in cuda_sim at every HELPER_PROBES argument and
        must equal that function at each. ValueError says why none does."""
        key = f"#{name}"
        if key not in self._known:
            self._known[key] = self._identify(name, definition)
        if self._known[key].startswith("!"):
            raise ValueError(self._known[key][1:])
        return self._known[key]

    def _identify(self, name: str, definition: str) -> str:
        # a __host__ __device__ helper is in the device code already
        defined = re.search(rf"\b{re.escape(name)}\s*\([^;{{}}]*\)\s*\{{", self.code)
        probe = (f"{self.code}\n{'' if defined else definition}\n"
                 "__global__ void kp_host_function(const long long *kp_in, long long *kp_out, "
                 "int kp_n) {\n    for (int kp_i = 0; kp_i < kp_n; ++kp_i)\n"
                 f"        kp_out[kp_i] = (long long)({name}(kp_in[kp_i]));\n}}\n")
        args = np.array(HELPER_PROBES, np.int64)
        out = np.zeros_like(args)
        why = self._run(probe, "kp_host_function", [args, out, np.int32(args.size)])
        if why:
            return f"!it does not run with the kernel's device code in cuda_sim: {why}"
        for fn in sorted(ONE_ARG_FUNCTIONS):
            try:
                if all(evaluate(f"{fn}({a})", {}) == v for a, v in zip(HELPER_PROBES,
                                                                        out.tolist(),
                                                                        strict=True)):
                    return fn
            except SizeExprError:
                continue
        seen = ", ".join(f"{name}({a}) = {int(out[HELPER_PROBES.index(a)])}"
                         for a in (1, 3, 1000))
        return f"!it equals no size function ({', '.join(sorted(ONE_ARG_FUNCTIONS))}): {seen}"

    def _run(self, probe: str, kernel: str, args: list) -> str:
        """"" when ``kernel`` of ``probe`` ran cleanly on ``args`` in cuda_sim, else why not."""
        try:
            run = runners.get("cuda_sim").kernel(probe, kernel, filename=self.filename) \
                .launch((1, 1, 1), (1, 1, 1), args)
        except (KportError, ValueError) as err:
            return str(err).splitlines()[0] if str(err) else type(err).__name__
        if not run.compiled:
            errors = [d for d in run.diagnostics if d.severity == "error"] or run.diagnostics
            return str(errors[0]).splitlines()[0] if errors else "it did not compile"
        if run.findings:
            return f"its probe kernel faulted in cuda_sim: {run.findings[0]}"
        return ""


@dataclass
class HostTerms:
    """What a launch's expressions name beyond the host's locals and macros: its type aliases
    (``using Ktraits = ...``, the bound names substituted), the values bound from the
    instantiation, the struct parameters whose fields a size names, and the compiler of the
    constants only the compiler knows (None: such a constant is unread)."""

    aliases: dict[str, str]
    bound: dict[str, str]
    structs: set[str]
    fields: set[str]
    known_bytes: set[str]  # types whose sizeof the size reader knows (scalars, bound types)
    constants: HostCompiler | None
    # the source's functions of one integer (name -> C++ text): a size function if they are one
    helpers: dict[str, str] = field(default_factory=dict)


# `params.batch` / `p->dim` (not a method call): a member of a host parameter
FIELD_ACCESS = re.compile(r"(?<![.\w])([A-Za-z_]\w*)\s*(?:\.|->)\s*([A-Za-z_]\w*)\b(?!\s*\()")
_SIZEOF_OPEN = re.compile(r"\bsizeof\s*\(")
_NAME = re.compile(r"(?<![.\w:])(?<!->)[A-Za-z_]\w*")
_MEMBER = re.compile(r"(?<![\w:])(?:typename\s+)?([A-Za-z_]\w*)\s*::\s*([A-Za-z_]\w*)")  # Kt::kN


def host_terms(text: str, terms: HostTerms, problems: list[str]) -> str | None:
    """``text`` with what ``terms`` say substituted: ``params.batch`` becomes the size
    ``batch``; ``Ktraits::kSmemSize`` and ``sizeof(typename Ktraits::scan_t)`` their values,
    compiled; None when one of those has no value (the reason in ``problems``)."""
    text = FIELD_ACCESS.sub(lambda m: m[2] if m[1] in terms.structs and m[2] in terms.fields
                            else m[0], text)
    out, at = [], 0
    for m in _SIZEOF_OPEN.finditer(text):
        if m.start() < at:
            continue
        end = _closing(text, m.end())
        inner = " ".join(text[m.end():end].split())
        if end < 0 or inner in terms.known_bytes or terms.constants is None:
            continue
        value = _constant(f"sizeof({inner})", terms, problems)
        if value is None:
            return None
        out.append(text[at:m.start()] + str(value))
        at = end + 1
    text = "".join(out) + text[at:]
    failed = []

    def value(m: re.Match) -> str:
        if m[1] not in terms.aliases:
            return m[0]
        got = _constant(m[0], terms, problems)
        failed.append(got is None)
        return str(got)
    text = _MEMBER.sub(value, text)
    return None if any(failed) else _helper_calls(text, terms, problems)


def _helper_calls(text: str, terms: HostTerms, problems: list[str]) -> str | None:
    """``text`` with each call of a host helper written as the size function it computes
    (llama.cpp's ``next_power_of_2(ncols)``: ``next_pow2(ncols)``); None when one is none."""
    for name, definition in terms.helpers.items():
        call = re.compile(rf"(?<![\w.:])(?<!->){re.escape(name)}(?=\s*\()")
        if not call.search(text):
            continue
        if terms.constants is None:
            problems.append(f"{name}() is a host function, read by running it, and no compiler "
                            "was given")
            return None
        try:
            text = call.sub(terms.constants.size_function(name, definition), text)
        except ValueError as err:
            problems.append(f"{name}() is a host function that is no size function: {err}")
            return None
    return text


def _constant(piece: str, terms: HostTerms, problems: list[str]) -> int | None:
    """The value of C++ constant ``piece`` (the host's aliases and bound names substituted)."""
    cpp = piece
    for _ in range(4):
        cpp = _NAME.sub(lambda m: terms.aliases.get(m[0], terms.bound.get(m[0], m[0])), cpp)
    if terms.constants is None:
        problems.append(f"{piece} ({cpp}) is a constant only the compiler knows, and no "
                        "compiler was given")
        return None
    try:
        return terms.constants(cpp)
    except ValueError as err:
        problems.append(f"{piece} ({cpp}) does not compile with the kernel's device code in "
                        f"cuda_sim: {err}")
        return None


def _closing(text: str, start: int) -> int:
    """The index of the ``)`` that closes the ``(`` before ``start``; -1 without one."""
    depth = 1
    for i in range(start, len(text)):
        depth += (text[i] == "(") - (text[i] == ")")
        if depth == 0:
            return i
    return -1
