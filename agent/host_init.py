"""What the host fills an output with before the launch (issue 15). A kernel that writes only
part of an output relies on the host's fill: torch-cluster's ``radius_cuda`` makes ``row =
torch::full({m * k}, -1, ...)`` and the kernel writes a neighbour's index only where one is
found; a counting kernel's output is ``torch::zeros`` or ``cudaMemset(dst, 0, ...)``. MLX's
outputs are fresh arrays, undefined until written (MLX's ``init_value`` fills them all with
one value), so the port needs the same fill, and the CUDA oracle must start from it too.

Read from the host function's text before the launch, for each argument the launch passes as a
tensor's data (``row.data_ptr<int64_t>()``, ``row.data<T>()``) or a plain pointer: the last
``VAR = torch::full(shape, V, ...)`` / ``at::full`` (V), ``torch::zeros`` (0),
``torch::ones`` (1), ``torch::empty`` (no fill: the kernel must write it all), and after it
``VAR.fill_(V)`` / ``VAR.zero_()``, or ``cudaMemset[Async](VAR, B, ...)`` with byte B 0 (0). A
value that is not a plain number is not read (no fill is said then, and the oracle's own start
is zeros, as before).
"""

from __future__ import annotations

import re

from agent.translate.macros import split_template_args

_TENSOR_DATA = re.compile(r"^\(?\s*([A-Za-z_]\w*)\s*(?:\.\s*value\s*\(\s*\)\s*)?\.\s*"
                          r"(?:data_ptr|data|mutable_data_ptr)\s*(?:<[^<>]*>)?\s*\(\s*\)\s*\)?$")
_PLAIN = re.compile(r"^\(?\s*(?:\([^()]*\*\s*\)\s*)?([A-Za-z_]\w*)\s*\)?$")
_NUMBER = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_MAKERS = {"zeros": 0.0, "ones": 1.0, "empty": None, "zeros_like": 0.0, "ones_like": 1.0,
           "empty_like": None}


def output_fills(text: str, line: int, arg_texts: list[str]) -> dict[int, float | None]:
    """The fill of each launch argument (by index) that the host code before ``line`` (1-based,
    the launch's line in ``text``) makes: a number, or None for an uninitialised tensor
    (``torch::empty``). Arguments whose fill is not seen are left out."""
    before = "\n".join(text.splitlines()[:line])
    out: dict[int, float | None] = {}
    for i, arg in enumerate(arg_texts):
        m = _TENSOR_DATA.match(arg.strip()) or _PLAIN.match(arg.strip())
        if m is None:
            continue
        found = _fill_of(before, m.group(1))
        if found is not _UNSEEN:
            out[i] = found
    return out


_UNSEEN = object()


def _fill_of(text: str, var: str):
    """The fill of ``var`` that the last statement making or filling it in ``text`` gives."""
    v = re.escape(var)
    events = []  # (position, fill)
    for m in re.finditer(rf"\b{v}\s*=\s*(?:torch|at)\s*::\s*(full|zeros|ones|empty|full_like|"
                         rf"zeros_like|ones_like|empty_like)\s*\(", text):
        kind = m.group(1)
        if kind in _MAKERS:
            events.append((m.start(), _MAKERS[kind]))
            continue
        args = split_template_args(_balanced(text, m.end()), "()[]{}")
        value = _number(args[1]) if len(args) >= 2 else None
        events.append((m.start(), value if value is not None else _UNSEEN))
    for m in re.finditer(rf"\b{v}\s*\.\s*(fill_|zero_)\s*\(", text):
        if m.group(1) == "zero_":
            events.append((m.start(), 0.0))
        else:
            value = _number(_balanced(text, m.end()))
            events.append((m.start(), value if value is not None else _UNSEEN))
    for m in re.finditer(rf"\bcudaMemset(?:Async)?\s*\(\s*(?:\([^()]*\)\s*)?{v}\s*,\s*", text):
        byte = _number(split_template_args(text[m.end():m.end() + 80] + ")", "()[]{}")[0])
        events.append((m.start(), 0.0 if byte == 0 else _UNSEEN))
    return max(events, key=lambda e: e[0])[1] if events else _UNSEEN


def _balanced(text: str, start: int) -> str:
    """The text from ``start`` (just inside an opening parenthesis) to its closing one."""
    depth = 1
    for i in range(start, min(len(text), start + 2000)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return ""


def c_literal(text: str | None) -> int | float | bool | None:
    """A C++ literal's value (`-1`, `2.5f`, `0x10u`, `5e4`, `true`); None for anything else."""
    t = (text or "").strip()
    if t in ("true", "false"):
        return t == "true"
    t = re.sub(r"[uUlL]+$", "", t)
    if "x" not in t.lower():
        t = re.sub(r"(?<=[\d.])[fF]$", "", t)  # a float suffix (in hex, f is a digit)
    if not _NUMBER.fullmatch(t):
        return None
    try:
        return int(t, 0)
    except ValueError:
        return float(t)


def _number(text: str) -> float | None:
    value = c_literal(text)
    return None if value is None or isinstance(value, bool) else float(value)
