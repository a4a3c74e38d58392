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
from dataclasses import dataclass

import numpy as np

import runners
from agent.translate.macros import split_template_args
from runners.errors import KportError

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


def constant_compiler(code: str, filename: str) -> Callable[[str], int]:
    """A function from a C++ integral constant expression over the types and constants of
    ``code`` (a kernel's device code, as cuda_closure writes it) to its value: compiled as a
    ``constexpr`` in a one-thread kernel appended to ``code`` and run once in cuda_sim
    (memoized). It raises ValueError with the compiler's first diagnostic when the expression
    does not compile or is no constant."""
    known: dict[str, int | str] = {}

    def value(expr: str) -> int:
        if expr not in known:
            known[expr] = _compiled(code, filename, expr)
        if isinstance(known[expr], str):
            raise ValueError(known[expr])
        return known[expr]
    return value


def _compiled(code: str, filename: str, expr: str) -> int | str:
    probe = (f"{code}\n__global__ void kp_host_constant(long long *kp_out) {{\n"
             f"    constexpr long long kp_value = (long long)({expr});\n"
             "    kp_out[0] = kp_value;\n}\n")
    out = np.zeros(1, np.int64)
    try:
        run = runners.get("cuda_sim").kernel(probe, "kp_host_constant", filename=filename) \
            .launch((1, 1, 1), (1, 1, 1), [out])
    except (KportError, ValueError) as err:
        return str(err).splitlines()[0] if str(err) else type(err).__name__
    if not run.compiled:
        errors = [d for d in run.diagnostics if d.severity == "error"] or run.diagnostics
        return str(errors[0]).splitlines()[0] if errors else "it did not compile"
    if run.findings:
        return f"its probe kernel faulted in cuda_sim: {run.findings[0]}"
    return int(out[0])


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
    constants: Callable[[str], int] | None


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
    return None if any(failed) else text


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
