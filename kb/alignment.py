"""Where knowledge meets a kernel: the lines of a CUDA source a search hit concerns, and the
lines of an analogue (a CUDA kernel and its Metal port) that do the same work as the lines of
the kernel being ported.

Both rest on the concept rules' exact matches (kb/rules_match.py): a rule hit concerns the lines
where its markers occur; an analogue corresponds to the kernel through the rules both use — on
the analogue's CUDA side by the same matching, on its Metal side where the rule's Metal form
occurs (its Metal API names, e.g. ``simd_shuffle_down`` for ``__shfl_down_sync``). Other hits
(architecture facts, fix rules, docs) concern the lines holding a CUDA construct their text
names.
"""

from __future__ import annotations

import functools
import re

from kb.concepts import Rule, load_rules
from kb.parse import Token, parse, tokens
from kb.rules_match import RuleHit, match_rules

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Metal names without an underscore that still mark a construct in a port
_METAL_WORDS = frozenset({
    "threadgroup", "popcount", "clz", "ctz", "rotate", "mulhi", "rsqrt", "fma", "exp", "exp2",
    "exp10", "log", "log2", "log10", "sqrt", "pow", "powr", "saturate", "absdiff", "hadd",
    "rhadd", "sincos", "rint", "trunc", "fmin", "fmax", "bfloat", "precise", "fast", "mul24",
    "simdgroup_matrix", "packed_float4", "packed_float3"})
_NOT_MARKERS = frozenset({"mem_flags", "uint", "float", "ushort", "const", "device"})
MAX_LINES = 8


@functools.cache
def _rules_by_id() -> dict[str, Rule]:
    return {r.id: r for r in load_rules()}


def rule(rule_id: str) -> Rule | None:
    """The concept rule ``rule_id`` of this kport (None when the KB holds an older one)."""
    return _rules_by_id().get(rule_id)


def metal_markers(metal_form: str) -> frozenset[str]:
    """The Metal API names of a rule's Metal form (``simd_shuffle_down(v, delta)`` ->
    {simd_shuffle_down}): identifiers with an underscore, and one-word built-ins where the form
    calls them (``exp(x)``, ``fast::exp``) or opens with them (``threadgroup float s[N]``), not
    where they only qualify a parameter (``f(threadgroup float* s)``)."""
    out = set()
    for i, m in enumerate(_IDENT.finditer(metal_form)):
        name = m.group()
        if name in _NOT_MARKERS:
            continue
        if "_" in name.strip("_") and len(name) >= 5:
            out.add(name)
        elif name in _METAL_WORDS:
            after = metal_form[m.end():].lstrip()[:2]
            if i == 0 or after[:1] in ("(", "<") or after == "::":
                out.add(name)
    return frozenset(out)


def metal_lines(text: str, markers: frozenset[str]) -> list[int]:
    """1-based lines of ``text`` (Metal) where one of ``markers`` occurs as a whole name."""
    if not markers:
        return []
    return [n for n, line in enumerate(text.splitlines(), 1)
            if markers & set(_IDENT.findall(line.split("//")[0]))]


def cuda_tokens(text: str) -> list[Token]:
    """Tree-sitter tokens of a CUDA text with its own line numbers."""
    data = text.encode()
    return tokens(parse(data, "cuda"), data)


def rules_in(text: str) -> list[RuleHit]:
    """The concept rules whose markers occur in a CUDA text (lines of that text)."""
    return match_rules(cuda_tokens(text))


@functools.cache
def cuda_vocabulary() -> frozenset[str]:
    """Every identifier of every rule's markers: the CUDA names kport knows a rule for."""
    out = set()
    for r in load_rules():
        for marker in r.markers:
            out.update(n for n in _IDENT.findall(marker) if len(n) > 2)
    return frozenset(out)


def named_lines(text_tokens: list[Token], hit_text: str) -> list[int]:
    """Lines whose tokens include a CUDA construct (a rule marker's name) ``hit_text`` names."""
    named = cuda_vocabulary() & set(_IDENT.findall(hit_text))
    return sorted({t.line for t in text_tokens if t.text in named})


def hit_lines(hit, file_rules: list[RuleHit], file_tokens: list[Token]) -> list[int]:
    """The lines of the query file that ``hit`` (a kb.search.Hit) concerns: a rule's
    occurrences; an analogue's shared rules; otherwise the constructs its text names."""
    meta = hit.metadata
    if meta.get("rule_id"):
        return next((h.lines for h in file_rules if h.rule_id == meta["rule_id"]), [])
    if hit.kind == "analogues":
        cuda, metal = analogue_sides(hit)
        shared = correspondence(file_rules, cuda, metal)
        return sorted({n for c in shared for n in c["lines"]})
    return named_lines(file_tokens, f"{hit.title}\n{hit.text}")


def analogue_sides(hit) -> tuple[str | None, str | None]:
    """(CUDA text, Metal text) of an analogue hit and its pair, whichever are known."""
    sides = {hit.metadata.get("language"): hit.text}
    if hit.pair:
        sides.setdefault(hit.pair.get("language"), hit.pair.get("text", ""))
    return sides.get("cuda"), sides.get("metal")


# Groups in the order a reader cares about how an analogue does them (collectives and
# synchronisation first, indexing and declarations last); the first ones also match the Metal
# side by any Metal form of their group (a shuffle butterfly ported as simd_max).
GROUP_ORDER = ("warp", "cooperative", "cub", "sync", "atomics", "tensor", "math", "fp64",
               "intrinsics", "memory", "types", "launch", "host", "debug")
_BY_GROUP = frozenset({"warp", "cooperative", "cub", "sync", "atomics", "tensor"})


@functools.cache
def group_markers(group: str) -> frozenset[str]:
    """The Metal names of every rule of ``group``."""
    return frozenset().union(*(metal_markers(r.metal) for r in load_rules() if r.group == group))


def correspondence(query_rules: list[RuleHit], cuda: str | None,
                   metal: str | None) -> list[dict]:
    """For each rule of the kernel being ported that the analogue also uses: the kernel's lines,
    and the lines of the analogue's CUDA and Metal texts (their own numbering) doing that work.
    The Metal side is found by the rule's Metal form, else (collectives, barriers, atomics,
    matrices) by any Metal form of its group. Rules the Metal side shows come first, then by
    GROUP_ORDER; a rule neither side of the analogue shows is left out."""
    on_cuda = {h.rule_id: h.lines for h in rules_in(cuda)} if cuda else {}
    out = []
    for h in query_rules:
        r = rule(h.rule_id)
        m_lines = metal_lines(metal, metal_markers(r.metal if r else h.metal)) if metal else []
        if metal and not m_lines and h.group in _BY_GROUP:
            m_lines = metal_lines(metal, group_markers(h.group))
        c_lines = on_cuda.get(h.rule_id, [])
        if c_lines or m_lines:
            out.append({"rule_id": h.rule_id, "title": h.title, "group": h.group,
                        "lines": h.lines, "cuda_lines": c_lines[:MAX_LINES],
                        "metal_lines": m_lines[:MAX_LINES]})
    rank = {g: i for i, g in enumerate(GROUP_ORDER)}
    return sorted(out, key=lambda c: (not c["metal_lines"], rank.get(c["group"], 99),
                                      c["lines"][:1]))


def excerpt(text: str, lines: list[int], width: int = 110) -> list[tuple[int, str]]:
    """(line, code) of ``lines`` in ``text``, each stripped and cut to ``width``."""
    rows = text.splitlines()
    return [(n, rows[n - 1].strip()[:width]) for n in lines if 1 <= n <= len(rows)]


def kernel_offset(meta: dict, text: str) -> int | None:
    """Lines of an analogue chunk's ``text`` before its kernel: a kernel chunk holds the
    functions the kernel calls first and the kernel last (kb.parse.kernel_closure); None when
    the chunk does not say where its kernel is."""
    start, end = meta.get("start_line"), meta.get("end_line")
    if meta.get("mlx_body") or not isinstance(start, int) or not isinstance(end, int):
        return None
    return max(0, len(text.splitlines()) - (end - start + 1))


def file_line(meta: dict, text: str, n: int) -> str:
    """``path:line`` of line ``n`` of an analogue chunk's ``text``: the kernel's own lines map
    to its file (it starts at ``start_line``), lines before it are helpers it calls; an MLX body
    chunk with a header holds ``// header`` ... ``// body`` before the body's lines."""
    path = str(meta.get("path") or "")
    rows = text.splitlines()
    if meta.get("mlx_body"):
        if rows and rows[0] == "// header" and "// body" in rows:
            body = rows.index("// body") + 1
            return f"{path}:{n - body}" if n > body else f"{path} (header)"
        return f"{path}:{n}"
    offset = kernel_offset(meta, text)
    if offset is not None and n > offset:
        return f"{path}:{meta['start_line'] + n - offset - 1}"
    return f"{path} (a function the kernel calls)"
