"""wmma in Metal: ``nvcuda::wmma`` fragments mapped onto kport's MSL library (kb/rules/metal/
kport_wmma.metal), whose fragments are the 8x8 simdgroup_matrix tiles covering them; the port's
header then carries the library.

Three steps, each small: the ``wmma`` namespace of a member the library has (``wmma::X``
after ``using namespace nvcuda;``, or ``nvcuda::wmma::X``) becomes ``kport_wmma::`` (any other
member stays a counted TODO naming it); a store writes its pointer and a load reads it (for
the roles of arrays touched only by wmma); and a fragment's elements read or written directly
(``frag.x[i]``, ``frag.num_elements``) stay counted TODOs: CUDA's element-to-lane layout and
Metal's differ and neither is specified, so no element index carries across.
"""

from __future__ import annotations

import re

from agent.translate.flow import Effect
from kb.concepts import metal_library

LIBRARY = "kport_wmma"
NAMESPACE = "kport_wmma"
SCOPES = ("wmma", "nvcuda")
ELEMENTS_RULE = "tensor.thread_elements"

# wmma:: members the library has -> the kb rule of each
MEMBERS = {m: "tensor.wmma_mma" for m in (
    "fragment", "matrix_a", "matrix_b", "accumulator", "row_major", "layout_t",
    "mem_row_major", "load_matrix_sync", "store_matrix_sync", "mma_sync")} | {
    "fill_fragment": "tensor.fill_fragment", "col_major": "tensor.load_col_major",
    "mem_col_major": "tensor.store_col_major"}

# What wmma's calls do through their pointer argument (flow.call_effects' table), for roles:
# store_matrix_sync(p, ...) writes p, load_matrix_sync(f, p, ...) reads p
_EFFECTS = {"store_matrix_sync": {0: Effect(writes=True)},
            "load_matrix_sync": {1: Effect(reads=True)}}
_FRAGMENT = re.compile(r"\bwmma\s*::\s*fragment\s*<")
_ELEMENT = r"\b({names})\b(\s*\[[^\]]*\])*\s*\.\s*(x|num_elements)\b"


def library() -> str:
    """The MSL text of kport's wmma (what a port using wmma carries in its header)."""
    return metal_library(LIBRARY)


def effects(data: bytes) -> dict[str, dict[int, Effect]]:
    """wmma's pointer effects by function name when the source ``data`` uses wmma, else {}."""
    return dict(_EFFECTS) if re.search(rb"\bwmma\s*::", data) else {}


def scope(emitter, node, name: str, member: str) -> str:
    """The Metal spelling of the namespace ``name`` (wmma or nvcuda) before ``member``, with
    the emitter counting it mapped or a TODO. ``nvcuda::wmma::X`` comes out as
    ``kport_wmma::kport_wmma::X``, which ``apply`` folds."""
    if name == "nvcuda" and member == "wmma":
        return NAMESPACE
    if name == "wmma" and member in MEMBERS:
        emitter._mapped(f"wmma::{member}", MEMBERS[member])
        emitter.ctx.helpers.add(LIBRARY)
        return NAMESPACE
    return emitter._todo(f"{name}::{member}", "tensor.wmma_mma", node,
                         f"kport's Metal wmma has no {name}::{member}")


def fragment_names(src: str) -> list[str]:
    """The variables declared as wmma fragments in ``src`` (``wmma::fragment<...> a, b[2];``)."""
    names = []
    for m in _FRAGMENT.finditer(src):
        depth, i = 1, m.end()
        while i < len(src) and depth:
            depth += {"<": 1, ">": -1}.get(src[i], 0)
            i += 1
        decl = re.match(r"[^;(){}=]*", src[i:])[0]  # `a, b[2]` or a parameter's `& a`
        if src[i + len(decl):i + len(decl) + 1] == "(":  # a function returning a fragment
            continue
        names += re.findall(r"(?:^|,)\s*&?\s*([A-Za-z_]\w*)", decl)
    return list(dict.fromkeys(names))


def apply(src: str, body: str, header_parts: list[str], ctx) -> tuple[str, list[str]]:
    """The body and header parts with ``nvcuda::wmma::`` folded to ``kport_wmma::`` and each
    direct access to a fragment's elements marked; emit.Context ``ctx`` counts those as
    TODOs (with their CUDA lines) and learns the library."""
    if not any(k.startswith("wmma::") for k in ctx.mapped):
        return body, header_parts
    ctx.helpers.add(LIBRARY)
    fold = re.compile(rf"\b{NAMESPACE}\s*::\s*{NAMESPACE}\s*::")
    body = fold.sub(f"{NAMESPACE}::", body)
    header_parts = [fold.sub(f"{NAMESPACE}::", p) for p in header_parts]
    names = fragment_names(src)
    if not names:
        return body, header_parts
    element = re.compile(_ELEMENT.format(names="|".join(map(re.escape, names))))
    for m in element.finditer(src):
        line = src.count("\n", 0, m.start()) + 1
        construct = f"wmma fragment element {m[1]}.{m[3]}"
        ctx.todo[construct] += 1
        ctx.todos.append((ELEMENTS_RULE, construct, line))
    note = (f" /* KPORT-TODO({ELEMENTS_RULE}): fragment elements have no portable lane "
            "layout */")
    body = element.sub(lambda m: m[0] + note, body)
    header_parts = [element.sub(lambda m: m[0] + note, p) for p in header_parts]
    return body, header_parts
