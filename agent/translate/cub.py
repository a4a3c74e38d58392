"""CUB in Metal: ``cub::`` collectives mapped onto kport's MSL library (kb/rules/metal/
kport_cub.metal), which the port's header then carries.

Three steps, each small: the ``cub::`` namespace of a member the library has becomes
``kport_cub::`` (any other member stays a counted TODO naming it); every construction of a
collective (``BlockLoadT(smem)``, ``cub::BlockReduce<float, 128>(temp)``, ``WarpScan ws(t)``)
gets the thread's linear index, which Metal has no implicit name for; and a TempStorage cast of
shared memory (``reinterpret_cast<typename X::TempStorage&>(smem_)``) says ``threadgroup``.
Constructions and casts are found on the Metal text: tree-sitter parses
``typename K::BlockLoadT(s).Load(...)`` as a broken declaration.
"""

from __future__ import annotations

import functools
import re

from agent.translate.tree import _walk
from kb.concepts import metal_library

LIBRARY = "kport_cub"
NAMESPACE = "kport_cub"
# The thread's linear index in its threadgroup (CUB's RowMajorTid): an MLX attribute in the
# kernel, an extra parameter of the same name in helpers (analyze.py's attribute params).
THREAD_INDEX = "thread_index_in_threadgroup"

# cub:: members the library has -> the kb rule of each
_COLLECTIVES = {"BlockLoad": "cub.block_load", "BlockStore": "cub.block_store",
                "BlockExchange": "cub.block_exchange", "BlockReduce": "cub.block_reduce",
                "BlockScan": "cub.block_scan", "WarpReduce": "cub.warp_reduce",
                "WarpScan": "cub.warp_scan"}
MEMBERS = dict(_COLLECTIVES) | {f: "cub.block_reduce" for f in ("Sum", "Max", "Min")} | {
    f"BLOCK_LOAD_{a}": "cub.block_load" for a in (
        "DIRECT", "STRIPED", "VECTORIZE", "TRANSPOSE", "WARP_TRANSPOSE",
        "WARP_TRANSPOSE_TIMESLICED")} | {
    f"BLOCK_STORE_{a}": "cub.block_store" for a in (
        "DIRECT", "STRIPED", "VECTORIZE", "TRANSPOSE", "WARP_TRANSPOSE",
        "WARP_TRANSPOSE_TIMESLICED")} | {
    f"BLOCK_REDUCE_{a}": "cub.block_reduce" for a in (
        "RAKING_COMMUTATIVE_ONLY", "RAKING", "WARP_REDUCTIONS")} | {
    f"BLOCK_SCAN_{a}": "cub.block_scan" for a in ("RAKING", "RAKING_MEMOIZE", "WARP_SCANS")}

_ALIAS = re.compile(r"\busing\s+(\w+)\s*=\s*([^;]*);|\btypedef\s+([^;]*?)\s*(\w+)\s*;")


def library() -> str:
    """The MSL text of kport's CUB (what a port using CUB carries in its header)."""
    return metal_library(LIBRARY)


def uses_cub(src: str | bytes) -> bool:
    """Whether the CUDA source names anything of ``cub::``."""
    text = src.decode(errors="replace") if isinstance(src, bytes) else src
    return re.search(r"\bcub\s*::", text) is not None


@functools.lru_cache(maxsize=8)
def collective_names(src: str) -> frozenset[str]:
    """The names that stand for a CUB collective type in ``src``: CUB's own and every alias
    (``using BlockLoadT = cub::BlockLoad<...>``, ``typedef cub::BlockReduce<...> R;``, aliases
    of aliases), so that ``Ktraits::BlockLoadT(smem)`` is known for a construction."""
    names = set(_COLLECTIVES) if uses_cub(src) else set()
    aliases = [(m[1] or m[4], m[2] or m[3]) for m in _ALIAS.finditer(src)]
    grown = bool(names)
    while grown:
        grown = False
        for name, target in aliases:
            if name not in names and re.search(
                    r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b", target):
                names.add(name)
                grown = True
    return frozenset(names)


def needs_thread_index(fn_text: str, src: str) -> bool:
    """Whether a function (its CUDA text) constructs a collective, so needs the thread index."""
    names = collective_names(src)
    return bool(names) and any(True for _ in _constructions(fn_text, names))


def data_effects(body: str, src: str) -> list[tuple[str, int, bool]]:
    """(the variable, the end of the call, whether it is written) for the array each
    collective's ``Load``/``Store`` reads or writes in ``body`` (CUDA text whose offsets the
    caller's are): ``Store(out, items, n)`` writes ``out``, ``Load(x, items)`` reads ``x``.
    Found on the text, as constructions are: ``typename K::BlockStoreT(s).Store(out, ...)``
    parses as a broken declaration, whose arguments no walk of the tree sees."""
    names = collective_names(src)
    out = []
    for _, close, _ in _constructions(body, names) if names else ():
        m = re.match(r"\s*\.\s*(Load|Store)\s*\(", body[close + 1:])
        if m is None:
            continue
        open_ = close + m.end()
        end = _matching(body, open_, "(", ")")
        root = re.match(r"[A-Za-z_]\w*", _first_argument(body[open_ + 1:end]))
        if root and end > 0:
            out.append((root[0], end + 1, m[1] == "Store"))
    return out


def temp_storage_params(fn, data: bytes) -> set[int]:
    """The indexes of function definition ``fn``'s ``X::TempStorage&`` parameters (mamba's
    ``load_input(..., typename Ktraits::BlockLoadT::TempStorage &smem_load, ...)``): threadgroup
    references in Metal, bound to the caller's shared memory itself, never to a copy."""
    decl = next((n for n in _walk(fn) if n.type == "function_declarator"), None)
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    params = [p for p in (plist.named_children if plist is not None else [])
              if p.type in ("parameter_declaration", "optional_parameter_declaration")]
    return {i for i, p in enumerate(params) if re.search(
        r"::\s*TempStorage\s*&", data[p.start_byte:p.end_byte].decode(errors="replace"))}


def _first_argument(args: str) -> str:
    """A call's argument text from its first argument's variable on: casts and parentheses
    taken off (``reinterpret_cast<vec_t*>(out + k), items`` -> ``out + k), items``)."""
    first = args.strip()
    while True:
        cast = re.match(r"(?:(?:reinterpret|static|const)_cast\s*<[^()]*>|\([^()]*\*\s*\))"
                        r"\s*", first)
        if cast:
            first = first[cast.end():].strip()
        elif first.startswith("("):
            first = first[1:].strip()
        else:
            return first


def pass_thread_index(text: str, src: str) -> tuple[str, list[str]]:
    """``text`` (Metal) with the thread index appended to each collective construction and
    ``threadgroup`` added to TempStorage reference casts; and the constructions left as they
    were (no TempStorage given: CUB's private shared memory, which Metal cannot allocate)."""
    names = collective_names(src)
    if not names:
        return text, []
    out, pos, unmapped = [], 0, []
    for name, close, empty in _constructions(text, names):
        if empty:
            unmapped.append(name)
            continue
        out.append(text[pos:close] + f", {THREAD_INDEX}")
        pos = close
    out.append(text[pos:])
    text = "".join(out)
    # a TempStorage lives in threadgroup memory, even viewed through a helper's reference
    # parameter, which a cast of a function's own memory would call `thread`
    text = re.sub(r"reinterpret_cast<\s*(?:thread\s+)?(?!threadgroup\b)((?:typename\s+)?"
                  r"[\w:<>,\s]*?::TempStorage)\s*&\s*>", r"reinterpret_cast<threadgroup \1&>",
                  text)
    return text, unmapped


def _constructions(text: str, names: frozenset[str]):
    """(name, index of the closing parenthesis, no arguments) for each ``NAME[<...>](args)``
    and ``NAME[<...>] var(args)`` in ``text`` where NAME is a collective type."""
    pattern = re.compile(r"(?<![\w.>])(?:(?:typename\s+)?[\w:<>]*::)?(" + "|".join(
        map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")
    for m in pattern.finditer(text):
        i = _skip_template_args(text, m.end())
        var = re.match(r"\s+[A-Za-z_]\w*", text[i:])
        if var and var[0].strip() not in ("const", "operator"):
            i += var.end()
        j = i + len(text[i:]) - len(text[i:].lstrip())
        if j >= len(text) or text[j] != "(":
            continue
        close = _matching(text, j, "(", ")")
        if close < 0:
            continue
        yield m[1], close, not text[j + 1:close].strip()


def _skip_template_args(text: str, i: int) -> int:
    j = i + len(text[i:]) - len(text[i:].lstrip())
    if j < len(text) and text[j] == "<":
        close = _matching(text, j, "<", ">")
        return close + 1 if close > 0 else i
    return i


def _matching(text: str, i: int, open_: str, close: str) -> int:
    """Index of the bracket closing text[i] (an ``open_``), or -1."""
    depth = 0
    for k in range(i, len(text)):
        depth += text[k] == open_
        depth -= text[k] == close
        if depth == 0:
            return k
        if text[k] == ";":
            return -1
    return -1


def spelled(value: str, ctx) -> str:
    """A template argument's text (``cub::BLOCK_LOAD_DIRECT``) in kport_cub's spelling; the
    library joins the header when the kernel uses nothing else of CUB's."""
    def one(m: re.Match) -> str:
        ctx.mapped[f"cub::{m[1]}"] += 1
        ctx.rules_used.add(MEMBERS[m[1]])
        ctx.helpers.add(LIBRARY)
        return f"{NAMESPACE}::{m[1]}"
    return re.sub(r"\bcub::(" + "|".join(MEMBERS) + r")\b", one, value)


def apply(src: str, body: str, header_parts: list[str], ctx) -> tuple[str, list[str]]:
    """The body and header parts with constructions given the thread index (emit.Context
    ``ctx`` learns the library and counts a construction without TempStorage as a TODO)."""
    if not any(k.startswith("cub::") for k in ctx.mapped):
        return body, header_parts
    ctx.helpers.add(LIBRARY)
    body, left = pass_thread_index(body, src)
    parts = []
    for part in header_parts:
        part, more = pass_thread_index(part, src)
        parts.append(part)
        left += more
    for name in left:
        construct = f"{name}() without TempStorage"
        ctx.todo[construct] += 1
        ctx.todos.append((MEMBERS.get(name, "cub.block_reduce"), construct, 0))
    return body, parts
