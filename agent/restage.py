"""Staging one threadgroup tile in another's storage (issue 16): the second named, mechanical
repair for a port over Apple's 32 KB, beside re-tiling (agent/retile.py). FlashAttention loads a
K tile and a V tile in one loop, reads K for the scores and only then V for the P.V product: K's
storage is free by the time V is read, so V can be loaded into it in a copy of the loop placed
just before V's first reader, between two barriers.

The shape it takes, in the block body of a loop (X, Y: threadgroup arrays the kernel body
declares at its top level, each alone in its declaration)::

    threadgroup_barrier(..mem_threadgroup..);
    for (int i = ...; ...) { T a = ...; X[..][..] = ...; Y[..][..] = ...; }
    threadgroup_barrier(..mem_threadgroup..);
    mid ...                    // may read X, never mentions Y
    R                          // the first statement (of this body) that mentions Y
    rest ...                   // never mentions X

becomes the loop storing X alone, then before R a barrier (X's readers are done), the loop
storing Y's values into X, another barrier, and R onwards reading X where they read Y; Y's
declaration goes. It applies only when every one of these holds (otherwise no candidate):
X and Y have one element type and X's every dimension is at least Y's (Y's indices stay in
range; subscripted element by element, a different row length changes nothing); every mention
of X and Y is inside that loop body, subscripted in full and never address-taken, and the header
mentions neither; the store loop declares its counter, its header changes no other name, and
its block holds only declarations and stores to X and Y, with no ++, -- or other assignment
(reading its inputs twice is then harmless); nothing in ``mid`` leaves the loop body
(return, break, continue, goto) or writes or re-declares a name the store loop reads; the
statements before the first barrier do not mention X or Y; the result fits in 32 KB. The
barriers added sit where the body's own barriers sit, so they run under the same (uniform)
control flow. The oracle then judges the port against the original CUDA like any candidate.
"""

from __future__ import annotations

import re
from itertools import permutations

from agent.retile import LIMIT, Tile, footprint, tiles
from agent.statements import ASSIGN, WORD, StatementError, Stmt, brackets, escapes, statements, walk
from corpus.candidate import Candidate
from runners.srcrewrite import Tok, tokenize

_BARRIER = "threadgroup_barrier(mem_flags::mem_threadgroup);"
_STEP = {"++", "--"}
_SHAPES = {"primitive_type", "type_identifier", "identifier"}


def share_storage(candidate: Candidate, case) -> Candidate | None:
    """The candidate with a tile Y loaded into a tile X's storage after X's last reader (module
    docstring); None when no loop of the port has that shape or the result would not fit."""
    template = dict(candidate.template)
    text = f"{candidate.header}\n{candidate.body}"
    before, arrays = footprint(text, template), tiles(text, template)
    if before is None or before <= LIMIT or arrays is None:
        return None
    shapes = dict(arrays)
    toks = tokenize(candidate.body)
    try:
        pairs = brackets(toks)
        body = statements(toks, 0, len(toks), pairs)
    except StatementError:
        return None
    decls = {n: s for s in body if (n := _tile_decl(toks, s, pairs)) and n in shapes}
    if len(shapes) != len(arrays):
        return None  # one name declared twice: which one a use means is not read here
    data = candidate.body.encode()
    for loop in walk(body):
        if loop.kind not in ("for", "while", "do") or loop.children[0].kind != "block":
            continue
        for x, y, edits in _plans(data, toks, loop.children[0].children, decls, shapes, pairs):
            if re.search(rf"\b({x}|{y})\b", candidate.header):
                return None  # a macro or helper in the header could reach the tiles
            new = _splice(data, edits).decode()
            after = footprint(f"{candidate.header}\n{new}", template)
            if after is not None and after <= LIMIT:
                origin = f"detail:{y} staged in {x}'s storage after {x}'s last reader: " \
                         f"threadgroup memory {before} -> {after} bytes"
                return candidate.model_copy(update={"body": new, "origin": origin})
    return None


def _plans(data, toks, block: tuple[Stmt, ...], decls, shapes, pairs):
    """(X, Y, byte edits) for each barrier-store loop-barrier run of ``block`` that qualifies."""
    for k in range(len(block) - 2):
        b1, loop, b2 = block[k:k + 3]
        if not (_barrier(toks, b1, pairs) and loop.kind == "for" and _barrier(toks, b2, pairs)):
            continue
        stores = _stores(toks, loop, pairs)
        if stores is None or len(stores) != 2 or not set(stores) <= set(decls):
            continue
        for x, y in permutations(stores):
            edits = _plan(data, toks, block, k, x, y, stores, decls, shapes, pairs)
            if edits is not None:
                yield x, y, edits


def _plan(data, toks, block, k, x, y, stores, decls, shapes, pairs) -> list | None:
    tx, ty = shapes[x], shapes[y]
    if not _holds(tx, ty):
        return None
    loop = block[k + 1]
    where = {name: [i for i, t in enumerate(toks) if t.kind == "identifier" and t.text == name]
             for name in (x, y)}
    r = next((j for j in range(k + 3, len(block)) if _within(block[j], where[y])), None)
    if r is None:
        return None
    targets = {c.head for c in stores[x] + stores[y]}
    for name in (x, y):
        decl = decls[name]
        for i in where[name]:
            if decl.first <= i <= decl.last:
                continue
            if not _subscripted(toks, i, len(shapes[name].dims), pairs):
                return None
            if i in targets:
                continue
            j = next((j for j in range(k + 3, len(block)) if _within(block[j], [i])), None)
            if j is None or (name == x and j >= r):
                return None  # a mention outside the loop body, in the store loop, or X after R
    mid = block[k + 3:r]
    if any(escapes(s, toks) for s in mid) or not _unchanged(toks, loop, mid, pairs):
        return None
    return _edits(data, toks, block, loop, r, x, y, stores, decls[y], where[y])


def _holds(tx: Tile, ty: Tile) -> bool:
    """Y's elements fit in X's storage at Y's own indices."""
    return (tx.type, tx.lanes) == (ty.type, ty.lanes) and len(tx.dims) == len(ty.dims) and \
        all(a >= b for a, b in zip(tx.dims, ty.dims, strict=True))


def _within(s: Stmt, indices) -> bool:
    return any(s.first <= i <= s.last for i in indices)


def _tile_decl(toks, s: Stmt, pairs) -> str | None:
    """The name ``threadgroup [const] T name[..]..;`` declares, alone; None for anything else."""
    if s.kind != "simple" or toks[s.head].text != "threadgroup":
        return None
    i = s.head + 1 + (toks[s.head + 1].text == "const")
    if not (WORD.match(toks[i].text) and toks[i + 1].kind == "identifier"):
        return None
    j = i + 2
    while toks[j].text == "[":
        j = pairs[j] + 1
    return toks[i + 1].text if j == s.last and j > i + 2 else None


def _barrier(toks, s: Stmt, pairs) -> bool:
    """``threadgroup_barrier(...)`` whose flags order threadgroup memory."""
    return s.kind == "simple" and toks[s.head].text == "threadgroup_barrier" and \
        toks[s.head + 1].text == "(" and pairs[s.head + 1] == s.last - 1 and \
        any(t.text == "mem_threadgroup" for t in toks[s.head:s.last])


def _stores(toks, loop: Stmt, pairs) -> dict[str, list[Stmt]] | None:
    """Tile name -> the statements storing it, when ``loop`` declares its counter and its block
    holds only declarations and ``name[..] = value;`` stores without side effects; else None."""
    clauses = _clauses(toks, loop, pairs)
    inner = loop.children[0]
    if clauses is None or inner.kind != "block" or loop.first != loop.head:
        return None
    (init, _), (cond, _), (step, at) = clauses
    if not _declaration(init, pairs) or any(t.text in ASSIGN | _STEP for t in cond):
        return None
    own = _declared(init)  # the step clause may change the counter alone
    if any(t.kind == "identifier" and t.text not in own and _written(toks, at + n, pairs)
           for n, t in enumerate(step)):
        return None
    stores: dict[str, list[Stmt]] = {}
    for c in inner.children:
        words = toks[c.head:c.last + 1]
        if c.kind != "simple" or c.first != c.head or any(
                t.text.startswith(("atomic", "threadgroup", "simdgroup")) or
                t.text in ("return", "break", "continue", "goto") for t in words):
            return None
        if _declaration(words[:-1], pairs):
            continue
        j = c.head + 1
        while toks[j].text == "[":
            j = pairs[j] + 1
        if j == c.head + 1 or toks[j].text != "=" or not WORD.match(toks[c.head].text) or \
                any(t.text in ASSIGN | _STEP for t in toks[j + 1:c.last]):
            return None
        stores.setdefault(toks[c.head].text, []).append(c)
    return stores


def _clauses(toks, loop: Stmt, pairs) -> list[tuple[list[Tok], int]] | None:
    """A for statement's init, condition and step: (tokens, index of the first); None for a
    range for."""
    close, out, at = pairs[loop.head + 1], [], loop.head + 2
    i = at
    while i <= close:
        if i == close or toks[i].text == ";":
            out.append((toks[at:i], at))
            at = i + 1
        i = pairs.get(i, i) + 1 if i < close else i + 1
    return out if len(out) == 3 else None


def _declaration(words: list[Tok], pairs) -> bool:
    """``[const] T a = .., b = ..`` with no assignment or step inside its initialisers."""
    while words and words[0].text in ("const", "constexpr"):
        words = words[1:]
    if len(words) < 2 or words[0].kind not in _SHAPES or words[1].kind != "identifier":
        return False
    depth = 0
    for t in words:
        depth += (t.text in "([{") - (t.text in ")]}")
        if t.text in _STEP or t.text in ASSIGN and (t.text != "=" or depth):
            return False
    return True


def _declared(words: list[Tok]) -> set[str]:
    """The names a declaration (``_declaration``) introduces."""
    while words and words[0].text in ("const", "constexpr"):
        words = words[1:]
    names, depth = {words[1].text}, 0
    for a, b in zip(words, words[1:], strict=False):
        depth += (a.text in "([{") - (a.text in ")]}")
        if a.text == "," and depth == 0 and b.kind == "identifier":
            names.add(b.text)
    return names


def _unchanged(toks, loop: Stmt, mid, pairs) -> bool:
    """No statement of ``mid`` writes, steps, takes the address of or re-declares a name the
    store loop reads from outside itself (its copy runs after them)."""
    own = _declared(_clauses(toks, loop, pairs)[0][0])
    for c in loop.children[0].children:
        if _declaration(toks[c.head:c.last], pairs):
            own |= _declared(toks[c.head:c.last])
    free = {t.text for t in toks[loop.head:loop.last + 1] if t.kind == "identifier"} - own
    for s in mid:
        if s.kind == "simple" and _declaration(toks[s.head:s.last], pairs) and \
                _declared(toks[s.head:s.last]) & free:
            return False
        for i in range(s.first, s.last + 1):
            if toks[i].kind == "identifier" and toks[i].text in free and _written(toks, i, pairs):
                return False
    return True


def _written(toks, i: int, pairs) -> bool:
    if toks[i - 1].text in _STEP | {"&"}:
        return True
    j = i + 1
    while j < len(toks) and toks[j].text in ("[", ".", "->"):
        j = pairs[j] + 1 if toks[j].text == "[" else j + 2
    return j < len(toks) and toks[j].text in ASSIGN | _STEP


def _subscripted(toks, i: int, n: int, pairs) -> bool:
    """``toks[i]`` is followed by ``n`` subscripts and not preceded by ``&``."""
    j = i + 1
    for _ in range(n):
        if j >= len(toks) or toks[j].text != "[":
            return False
        j = pairs[j] + 1
    return toks[i - 1].text != "&"


def _edits(data: bytes, toks, block, loop: Stmt, r: int, x, y, stores, decl: Stmt,
           ys) -> list[tuple[int, int, bytes]]:
    """Byte edits of the body: Y's declaration and stores out, a copy of the store loop storing
    Y's values into X between barriers before ``block[r]``, every other Y renamed X."""
    edits = [(toks[decl.first].start, toks[decl.last].end,
              f"// kport: {y} is staged in {x}'s storage (over 32 KB otherwise)".encode())]
    edits += [_removal(data, toks, c) for c in stores[y]]
    inside = {c.head for c in stores[y]}
    edits += [(toks[i].start, toks[i].end, x.encode()) for i in ys
              if i not in inside and not decl.first <= i <= decl.last]
    lo, hi = toks[loop.first].start, toks[loop.last].end
    local = [_removal(data, toks, c) for c in stores[x]]
    local += [(toks[i].start, toks[i].end, x.encode()) for i in inside]
    copy = _splice(data[lo:hi], [(a - lo, b - lo, t) for a, b, t in local])
    indent = _indent(data, lo)
    text = indent + _BARRIER.encode() + f"  // kport: {x}'s readers are done".encode() + \
        b"\n" + indent + copy + b"\n" + indent + _BARRIER.encode() + b"\n"
    at = toks[block[r].first].start
    line = data.rfind(b"\n", 0, at) + 1
    if data[line:at].strip():
        return [*edits, (at, at, b"\n" + text)]
    return [*edits, (line, line, text)]


def _indent(data: bytes, at: int) -> bytes:
    line = data.rfind(b"\n", 0, at) + 1
    return data[line:at] if not data[line:at].strip() else b""


def _removal(data: bytes, toks, c: Stmt) -> tuple[int, int, bytes]:
    """A statement out, with its line when nothing but a comment shares it."""
    start, end = toks[c.first].start, toks[c.last].end
    line = data.rfind(b"\n", 0, start) + 1
    stop = data.find(b"\n", end)
    stop = len(data) if stop < 0 else stop
    rest = data[end:stop].strip()
    if not data[line:start].strip() and (not rest or rest.startswith(b"//")):
        return line, min(stop + 1, len(data)), b""
    return start, end, b""


def _splice(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    out, pos = [], 0
    for start, end, text in sorted(edits):
        out += [data[pos:start], text]
        pos = end
    return b"".join([*out, data[pos:]])
