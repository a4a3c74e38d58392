"""Re-tiling a port whose threadgroup memory is over Apple's 32 KB (issue 16): a named, mechanical
repair. CUDA kernels size their shared tiles for 48-228 KB; when a tile dimension is a template
parameter of the port (mamba's selective scan: ``s_B[NSTATE][NTHREADS * NITEMS]``), halving that
parameter shrinks the tiles and the kernel walks its data in more, smaller chunks.

The repair evaluates the footprint of every ``threadgroup T name[d1][d2]...`` declaration of
the port (its dimensions over the template values and the ``constexpr`` integers the port
defines), then halves one template parameter until the total fits: a power of two that sizes a
tile, does not appear in the launch (grid or threadgroup: changing it would change which
threads run), and reads as a tiling factor by name (ITEMS, TILE, CHUNK, BLOCK_M/N/K, BM/BN/BK,
ROWS/COLS per thread ...) rather than a problem size such as a head or state dimension. The
oracle then judges the re-tiled port against the original CUDA kernel like any other candidate:
a parameter that was not a free tiling choice shows as a wrong result, never as an accepted
port. Kernels whose tiles are fixed constants are not re-tiled; where one tile's storage is free
before another is read (FlashAttention at head dim 128: V read after K's last reader), the
other repair stages that tile in it (agent/restage.py; agent.repairs tries it first, as it keeps
the work's decomposition). ``tiles`` gives both repairs the arrays' shapes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from corpus.candidate import Candidate
from runners.sizeexpr import SizeExprError, evaluate

LIMIT = 32768  # bytes of threadgroup memory a threadgroup may use (apple-gpu-facts.md)
_BYTES = {"char": 1, "uchar": 1, "bool": 1, "short": 2, "ushort": 2, "half": 2, "bfloat": 2,
          "int": 4, "uint": 4, "float": 4, "long": 8, "ulong": 8}
# `threadgroup float s_u[CHUNK], s_dt[CHUNK];`: the element type, its lanes, the declarators
_DECL = re.compile(r"\bthreadgroup\s+(?:const\s+)?([A-Za-z_]\w*?)([234])?\s+([^;{}()]+);")
_ARRAY = re.compile(r"^\s*([A-Za-z_]\w*)((?:\s*\[[^\]]+\])+)\s*$")
_CONSTEXPR = re.compile(r"\bconstexpr\s+(?:const\s+)?(?:unsigned\s+)?(?:int|uint|short|long|"
                        r"size_t)\s+([^;]+);")
_TILING = re.compile(r"ITEM|TILE|CHUNK|PER_THREAD|PER_WARP|^B[MNKQ]$|^BLOCK_[MNKQ]$|^k?Block[MNK]$|"
                     r"^TM$|^TN$|^TK$|UNROLL", re.I)


def footprint(text: str, template: dict) -> int | None:
    """Bytes of the threadgroup arrays ``text`` declares at ``template``'s values; None when a
    dimension or an element type cannot be read (then no re-tiling is tried)."""
    arrays = tiles(text, template)
    if arrays is None:
        return None
    return sum(_BYTES[t.type] * t.lanes * math.prod(t.dims) for _, t in arrays)


@dataclass(frozen=True)
class Tile:
    type: str  # the element's scalar type: float for float4
    lanes: int  # 1, or a vector's lanes (3 counts as 4: its size)
    dims: tuple[int, ...]


def tiles(text: str, template: dict) -> list[tuple[str, Tile]] | None:
    """(name, Tile) of each threadgroup array ``text`` declares, its dimensions evaluated at
    ``template``'s values and the ``constexpr`` integers the text defines; None when a dimension
    or an element type cannot be read."""
    values = {k: v for k, v in template.items() if isinstance(v, int) and not isinstance(v, bool)}
    for m in _CONSTEXPR.finditer(text):  # `constexpr int CHUNK = 32 * NITEMS, SPG = N / NSG;`
        for part in _split(m[1]):
            name, _, expr = part.partition("=")
            try:
                values[name.strip()] = int(evaluate(_c(expr), values))
            except SizeExprError:
                continue
    out = []
    for m in _DECL.finditer(text):
        if m[1] not in _BYTES:
            return None
        lanes = int(m[2] or 1) if m[2] != "3" else 4
        for declarator in _split(m[3]):
            array = _ARRAY.match(declarator)
            if array is None:
                return None  # a reference, an initialiser: not a tile kport can size
            try:
                dims = tuple(int(evaluate(_c(d), values))
                             for d in re.findall(r"\[([^\]]+)\]", array[2]))
            except SizeExprError:
                return None
            out.append((array[1], Tile(m[1], lanes, dims)))
    return out


def retile(candidate: Candidate, case) -> Candidate | None:
    """The candidate with one tiling template parameter halved until its threadgroup memory
    fits (module docstring); None when no parameter qualifies or halving cannot make it fit."""
    text = f"{candidate.header}\n{candidate.body}"
    template = dict(candidate.template)
    before = footprint(text, template)
    if before is None or before <= LIMIT:
        return None
    launch = " ".join(str(e) for e in [*candidate.grid, *candidate.threadgroup])
    for name in sorted(template, key=lambda n: -template[n] if isinstance(template[n], int)
                       else 0):
        value = template[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 2 or \
                value & (value - 1) or not _TILING.search(name) or \
                re.search(rf"\b{re.escape(name)}\b", launch):
            continue
        trial = dict(template)
        while trial[name] >= 2:
            trial[name] //= 2
            now = footprint(text, trial)
            if now is None or now >= before:
                break  # the parameter does not size the tiles
            if now <= LIMIT:
                origin = f"detail:re-tiled, {name} {value} -> {trial[name]}: threadgroup " \
                         f"memory {before} -> {now} bytes"
                return candidate.model_copy(update={"template": trial, "origin": origin})
    return None


def _split(decls: str) -> list[str]:
    """``A = x, B = f(y, z)`` at its top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in decls:
        depth += (ch in "([{") - (ch in ")]}")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def _c(expr: str) -> str:
    """A C integer expression as a size expression: ``/`` divides as integers."""
    return re.sub(r"(?<![/])/(?![/])", "//", re.sub(r"(\d+)[uUlL]+\b", r"\1", expr)).strip()
