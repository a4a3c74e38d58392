"""Pointer shapes measured, not guessed (issue 15): the CUDA kernel runs in cuda_sim, checked
mode, with every buffer larger than it can need, at the case's sizes and at sizes derived from
them; the access extents the simulator records (runners.simhost.SimRecord.extents: the
elements each buffer was read and written at) are fitted by an expression over the size names.

The fit, simplest first, each verified at a size set it was not fitted on:
1. a constant (no size moves the extent);
2. one product ``c * a * b`` (doubling each size it uses doubles the extent, the others leave
   it alone): a flat array over the launch, ``nrows * ncols``;
3. a multilinear sum: products of the sizes that move it (every subset while there are at
   most MAX_TERMS, else those of up to two or three sizes and the product of all), with integer
   coefficients (or eighths and sixteenths: byte strides) found by least squares over further
   size sets: strided views such as ``(nrows - 1) * stride_row + ncols``.
A buffer no fit explains keeps the flat guess and says so. An input's shape is its read extent,
an output's its write extent, an inout's the larger; extents below element 0 are not
described (the report says so), nor one that two runs at the same sizes disagree on (it moves
with the data).

Every size set keeps the relations the code states among the sizes (agent/size_relations.py:
``C == 64 * H``, ``T % B == 0``); those only the values show are kept by a second pass when the
first cannot explain a buffer. An integer input read as CSR offsets is filled with valid
offsets (``ArgProbe.offsets``), not random indices.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import runners
from agent.size_relations import SizeRelations
from corpus.check import csr_offsets
from runners.dtypes import DTYPES
from runners.sizeexpr import SizeExprError, evaluate
from runners.structs import field_arrays, struct_bytes, struct_value, with_pointers

START_ELEMENTS = 1 << 16  # each buffer's first size; grown while the kernel reaches its end
MAX_ELEMENTS = 1 << 24  # a buffer never grows past this (64 MiB of float32)
MAX_RUNS = 64  # simulator runs one probe may take
MAX_TERMS = 40  # products a fit may combine
MAX_SECONDS = 90.0  # a probe stops starting runs after this long (a slow kernel's shapes stay
# flat guesses, said in the report)


@dataclass
class ArgProbe:
    """What the probe needs of one kernel argument (the case's ``[[args]]`` entry)."""

    name: str
    role: str  # in, out, inout, scalar
    dtype: str
    value: object = None  # a scalar's value or size expression
    fields: list[dict] | None = None  # a struct passed by value (runners/structs.py)
    null: bool = False  # a pointer passed as nullptr
    field: str = ""  # the struct pointer field ("params.x_ptr") that holds this array
    offsets: str = ""  # CSR offsets ending at this size expression (case init "offsets:END")


@dataclass
class Probe:
    """The fitted shapes (argument -> expression) and what could not be fitted, and why."""

    shapes: dict[str, str] = field(default_factory=dict)
    unfitted: dict[str, str] = field(default_factory=dict)
    runs: int = 0
    # each buffer's extent at the sizes (a fitted one's, or one that two runs agree on)
    base: dict[str, int] = field(default_factory=dict)
    relations: list[str] = field(default_factory=list)  # size relations the runs kept


def extents_runner(code: str, kernel: str, filename: str, args: list[ArgProbe],
                   launch: Callable[[dict], tuple[list, list, int]]) -> _Runner:
    """A runner of the kernel whose ``extents(sizes)`` gives each buffer's access end (None
    when the kernel cannot run there): for probes beside the shapes' (agent/stride_probe.py)."""
    return _Runner(code, kernel, filename, args, launch)


class _Runner:
    """Runs the kernel at a size set, each buffer sized for it; extents by name."""

    def __init__(self, code: str, kernel: str, filename: str, args: list[ArgProbe],
                 launch: Callable[[dict], tuple[list, list, int]]):
        self.kernel = runners.get("cuda_sim").kernel(code, kernel, filename=filename)
        self.args, self.launch = args, launch
        self.buffers = [a.name for a in args if _is_buffer(a)]  # the arrays extents describe
        self.lengths: dict[str, int] = {}  # each buffer's length in the last run (elements)
        self.runs = 0  # size sets run (MAX_RUNS bounds them)
        self.launches = 0  # simulator runs: a size set whose buffers were too small runs again
        self.reached: list[tuple[dict[str, int], dict[str, int]]] = []  # (sizes, extents) so far
        self.movers: dict[str, list[str]] = {}  # the sizes known to move a buffer's extent
        self.seed = 2  # the next random size set's seed (agent.shape_probe._another)
        self.failure = ""  # why the first run that could not run failed, when it says
        self.started = time.monotonic()

    def extents(self, sizes: dict[str, int]) -> dict[str, int] | None:
        """The end (exclusive) of each buffer's accesses by role at ``sizes``; None when the
        kernel cannot run there. Offsets arrays are read first as all zeros (every segment
        empty, so a search over them reads them all), then filled with valid offsets for the
        count they were read at, until they are read at the count they hold."""
        offsets = [a.name for a in self.args if a.offsets]
        counts: dict[str, int] | None = None
        for _ in range(4 if offsets else 1):
            got = self._grown(sizes, counts)
            if got is None and counts is None and offsets:
                counts = dict.fromkeys(offsets, 2)  # zeros fault it: one full segment
                continue
            if got is None or not offsets:
                return got
            now = {n: got[n] for n in offsets}
            if now == counts:
                return got
            counts = now
        return None

    def _grown(self, sizes: dict[str, int], counts: dict[str, int] | None):
        if self.runs >= MAX_RUNS or time.monotonic() - self.started > MAX_SECONDS:
            return None
        self.runs += 1
        self.lengths = self._first_lengths(sizes)
        while True:
            got = self._once(sizes, counts)
            if got is None:
                return None
            short = {b: e for b, e in got.items()
                     if e >= self.lengths[b] and self.lengths[b] < MAX_ELEMENTS}
            if not short:
                self.reached.append((dict(sizes), got))
                return got
            for b, e in short.items():  # it ran off these buffers' ends: grow them past it
                self.lengths[b] = _length(max(e + 1, self.lengths[b] * 8))

    def _first_lengths(self, sizes: dict[str, int]) -> dict[str, int]:
        """Each buffer's length in a run at ``sizes``: the least of the bounds earlier runs
        give its extent (one reached at sizes s grows to sizes s' at most by the product of
        the ratios s'/s above 1, where it is a multilinear expression with positive terms, as
        flat and strided views are), rounded up (``_length``); a wrong bound only costs a run
        that grows. Once the sizes that move a buffer are known (``movers``), only theirs
        count. Each buffer is sized on its own and to the run: every buffer is made, written
        and read by every run, and one sized for the largest extent any buffer or run needs
        (16M elements) made a run 10-50 times slower than one sized to its own."""
        earlier = [(before, reached) for before, reached in self.reached
                   if before.keys() == sizes.keys()
                   and all(v > 0 for v in (*before.values(), *sizes.values()))]
        lengths = {}
        for b in self.buffers:
            moving = self.movers.get(b, sizes)
            lengths[b] = _length(min((reached.get(b, 0) * math.prod(
                max(1.0, sizes[n] / before[n]) for n in moving)
                for before, reached in earlier), default=0.0))
        return lengths

    def _pointed(self, values: list) -> list:
        """The kernel's arguments: each struct with its pointer fields pointing at the arrays
        of the arguments that name them (cuda_sim labels those STRUCT.FIELD)."""
        by_name = {a.name: v for a, v in zip(self.args, values, strict=True)}
        return [with_pointers(a.fields, v, field_arrays(a.name, self.args, by_name))
                if a.fields else v
                for a, v in zip(self.args, values, strict=True) if a.fields or not a.field]

    def _once(self, sizes: dict[str, int], counts: dict[str, int] | None
              ) -> dict[str, int] | None:
        self.launches += 1
        rng = np.random.default_rng(self.launches)
        values = []
        for a in self.args:
            storage = DTYPES[a.dtype][0]
            if a.null:
                values.append(np.uint64(0))
            elif a.fields:
                try:
                    values.append(struct_value(a.fields, struct_bytes(
                        a.fields, {}, lambda v, _: evaluate(v, sizes))))
                except (SizeExprError, ValueError):
                    return None
            elif a.role == "scalar":
                try:
                    v = evaluate(a.value, sizes) if isinstance(a.value, str) else a.value
                except SizeExprError:
                    return None
                try:
                    values.append(np.dtype(storage).type(v))
                except OverflowError:  # `--size n=3000000000` for an int32 n
                    self.failure = self.failure or (f"{a.name} = {v} does not fit its type "
                                                    f"{a.dtype}")
                    return None
            elif a.offsets and a.role != "out":
                try:
                    end = int(evaluate(a.offsets, sizes))
                except SizeExprError:
                    return None
                fill = np.zeros(self.lengths[a.name], np.int64)
                if counts is not None:
                    n = min(counts[a.name], len(fill))
                    fill[n:] = end
                    fill[:n] = csr_offsets(n, end, rng)
                values.append(fill.astype(storage))
            elif a.dtype.startswith(("float", "bfloat")) and a.role != "out":
                values.append(rng.standard_normal(self.lengths[a.name]).astype(storage))
            elif a.role != "out":
                values.append(rng.integers(0, 4, self.lengths[a.name]).astype(storage))
            else:
                values.append(np.zeros(self.lengths[a.name], storage))
        values = self._pointed(values)
        try:
            grid, block, smem = self.launch(sizes)
            run = self.kernel.launch(grid, block, values, shared_mem=smem)
        except (ValueError, SizeExprError) as err:
            self.failure = self.failure or str(err)
            return None
        fault = not run.extents or any(f.kind in ("out_of_bounds", "crash", "timeout")
                                       for f in run.findings)
        if not run.compiled:  # the kernel does not build: every run would say so
            self.failure = self.failure or "; ".join(str(d) for d in run.diagnostics
                                                     if d.severity == "error")[:400]
        out = {}
        for a in self.args:
            seen = run.extents.get(a.field or a.name) or {}
            sides = [seen.get("read")] if a.role == "in" else [seen.get("write")] \
                if a.role == "out" else [seen.get("read"), seen.get("write")]
            ends = [s[1] for s in sides if s is not None]
            if _is_buffer(a):
                out[a.name] = max(ends, default=0)
        if fault and not (run.extents and any(e > self.lengths[b] and self.lengths[b] <
                                              MAX_ELEMENTS for b, e in out.items())):
            if run.findings and not self.failure:
                self.failure = str(run.findings[0])[:300]
            return None  # sizes the kernel cannot run at (a tile overrun, a fault)
        return out  # a run off a buffer's end: extents() grows the buffers and runs again


def probe_shapes(code: str, kernel: str, filename: str, args: list[ArgProbe],
                 sizes: dict[str, int], launch: Callable[[dict], tuple[list, list, int]],
                 relations: SizeRelations | None = None) -> Probe:
    """Fit each buffer's extent over ``sizes``' names (module docstring). ``launch(sizes)``
    gives (grid, block, dynamic shared bytes) of a size set. ``relations``
    (agent/size_relations.py): those the code states hold in every run; those only the
    values show are kept by a second pass, for the buffers the first cannot fit or whose fit
    a size set keeping them contradicts (``Probe.relations`` lists those relied on)."""
    relations = relations or SizeRelations(dict(sizes))
    stated = relations.stated()
    runner = _Runner(code, kernel, filename, args, launch)
    probe = Probe(relations=[r.text() for r in stated.relations])
    base = runner.extents(sizes)
    buffers = list(runner.buffers)
    if base is None:
        why = f" ({runner.failure})" if runner.failure else ""
        probe.unfitted = {b: f"the kernel did not run in cuda_sim at the case's sizes{why}"
                          for b in buffers}
        probe.runs = runner.launches
        return probe
    probe.base = dict(base)
    # an extent that moves with the data (the neighbours a search finds) holds at no size set
    again = runner.extents(sizes) or base
    for b in [b for b in buffers if again[b] != base[b]]:
        probe.unfitted[b] = (f"its extent moves with the data (two runs at these sizes reached "
                             f"{base[b]} and {again[b]})")
        buffers.remove(b)
        del probe.base[b]
    probe.shapes, unfitted = _fit(runner, buffers, sizes, base, stated)
    probe.unfitted.update(unfitted)
    if len(stated.relations) < len(relations.relations):
        keeping = [(s, runner.extents(s)) for s in
                   (relations.keep(_another(sizes, seed)) for seed in (1, 2))]
        keeping = [(s, e) for s, e in keeping if e is not None]
        suspects = [b for b in buffers if base[b] and (b not in probe.shapes or any(
            _value(probe.shapes[b], s) != e[b] for s, e in keeping))]
        if suspects:
            shapes, _ = _fit(runner, suspects, sizes, base, relations, keeping)
            for b in suspects:
                if b in shapes:
                    probe.shapes[b] = shapes[b]
                    probe.unfitted.pop(b, None)
                    probe.relations = [r.text() for r in relations.relations]
                elif b in probe.shapes:
                    probe.unfitted[b] = (f"{probe.shapes.pop(b)} fits the sizes moved one by "
                                         "one but not sizes that keep "
                                         f"{relations.describe()}, and nothing fits those")
    probe.runs = runner.launches
    return probe


def _fit(runner: _Runner, buffers: list[str], sizes: dict[str, int], base: dict,
         rel: SizeRelations, extra=()) -> tuple[dict[str, str], dict[str, str]]:
    """(shapes, unfitted and why) of ``buffers`` over the sizes that move freely under
    ``rel``, every run at a size set that keeps ``rel``; ``extra``: (sizes, extents) already
    measured at such sets."""
    names = rel.free()
    doubled, samples = {}, [(sizes, base), *extra]
    for n in names:
        at = rel.keep({**sizes, n: _double(sizes[n])})
        doubled[n] = runner.extents(at)
        if doubled[n]:
            samples.append((at, doubled[n]))
    coupled, joint = _coupled(sizes, doubled, runner, rel)
    if coupled:  # sizes the kernel needs in proportion (C / H == head size): one stands for all
        keep = max(coupled, key=lambda n: sizes[n])
        names = [n for n in names if n == keep or n not in coupled]
        doubled[keep] = joint[1]
        samples = [(sz, e) for sz, e in samples  # a partner's lone doubling misled
                   if not any(sz[n] != sizes[n] for n in coupled)] + [joint]
    check = rel.keep(_another(sizes, 1, coupled))
    at_check = runner.extents(check)
    movers = {b: [n for n in names if doubled[n] is None or doubled[n][b] != base[b]]
              for b in buffers}
    _hidden_movers(runner, buffers, sizes, names, movers, samples, rel)
    runner.movers.update(movers)  # later runs size these buffers by these sizes alone
    shapes, unfitted = {}, {}
    for b in buffers:
        moved = movers[b]
        expr = None
        if not moved:
            expr = str(base[b])
        elif all(doubled[n] is not None and doubled[n][b] == 2 * base[b] for n in moved):
            prod = math.prod(sizes[n] for n in moved)
            if base[b] % prod == 0:
                expr = _expr(rel.rewrite([(base[b] // prod, tuple(moved))]))
        if expr is not None and at_check is not None and _value(expr, check) != at_check[b]:
            expr = None
        if expr is None:
            expr = _linear_fit(b, moved, sizes, samples, runner, coupled, rel)
        if expr is None:
            unfitted[b] = f"no expression over {', '.join(moved)} fits its measured extents"
        elif base[b] == 0:
            unfitted[b] = "the kernel never accessed it at the case's sizes"
        else:
            shapes[b] = expr
    return shapes, unfitted


def _hidden_movers(runner: _Runner, buffers: list[str], sizes: dict[str, int], names: list[str],
                   movers: dict[str, list[str]], samples: list, rel: SizeRelations) -> None:
    """Add to ``movers`` the sizes that move a buffer's extent only once other sizes have
    moved: a stride times a count of 1 (llama.cpp's ``i3 * s03`` with ``ne03 == 1``: doubling
    s03 alone moves nothing). Measured where every size that moves some buffer is doubled:
    once with all the others doubled too, then each of those alone where that changed an
    extent. The runs join ``samples``."""
    moving = sorted({n for ns in movers.values() for n in ns}, key=names.index)
    still = [n for n in names if n not in moving]
    if not moving or not still:
        return
    at = rel.keep({**sizes, **{n: _double(sizes[n]) for n in moving}})
    there = runner.extents(at)
    every = rel.keep({**at, **{n: _double(at[n]) for n in still}})
    got = runner.extents(every) if there is not None else None
    if got is None:
        return
    samples += [(at, there), (every, got)]
    changed = [b for b in buffers if got[b] != there[b]]
    if not changed:
        return
    for n in still:
        alone = rel.keep({**at, n: _double(at[n])})
        moved = runner.extents(alone)
        if moved is None:
            continue
        samples.append((alone, moved))
        for b in changed:
            if moved[b] != there[b] and n not in movers[b]:
                movers[b].append(n)


def _is_buffer(a: ArgProbe) -> bool:
    """An array the kernel reads or writes through a pointer argument of its own or a struct
    field (not a scalar, a struct passed whole, or a null pointer)."""
    return a.role != "scalar" and not a.fields and not a.null


def _length(need: float) -> int:
    """A buffer length of at least ``need`` elements: START_ELEMENTS times a power of 2, at
    most MAX_ELEMENTS."""
    length = START_ELEMENTS
    while length <= need and length < MAX_ELEMENTS:
        length *= 2
    return min(length, MAX_ELEMENTS)


def _double(v: int) -> int:  # keeps the sign of a negative shift
    return v * 2 if v > 0 else 2


def _coupled(sizes: dict[str, int], doubled: dict, runner: _Runner,
             rel: SizeRelations) -> tuple[list[str], tuple | None]:
    """(the sizes the kernel cannot run at when one alone is doubled but can when they are
    doubled together, the joint run (sizes, extents)); ([], None) when there are none such
    (llama.cpp's wkv: C / H must stay the head size)."""
    failed = [n for n, e in doubled.items() if e is None]
    if not failed:
        return [], None
    # all that fail together, else the first with a partner that runs with it (doubling H
    # alone runs, reading a head of garbage; doubling C alone does not)
    tries = ([failed] if len(failed) > 1 else []) + [
        [failed[0], o] for o in doubled if o != failed[0]]
    for group in tries:
        joint = rel.keep({**sizes, **{n: _double(sizes[n]) for n in group}})
        got = runner.extents(joint)
        if got is not None:
            return group, (joint, got)
    return [], None


def _another(sizes: dict[str, int], seed: int, coupled=()) -> dict[str, int]:
    """A size set near ``sizes`` with every size moved (the ``coupled`` ones by one factor).
    Odd seeds multiply each size by 1, 2 or 4, which keeps what the host's contract makes
    divisible (llama.cpp's wkv: T a multiple of B); even seeds add to it, for values of
    every kind."""
    rng = np.random.default_rng(1000 + seed)
    factor = int(rng.integers(2, 5))
    out = {n: sizes[n] * factor for n in coupled}
    for n, v in sizes.items():
        if n in out:
            continue
        if seed % 2:
            out[n] = v * int(rng.choice([1, 2, 4]))
            continue
        # keep a size's power-of-two factor (up to 16): a byte stride stays a whole number of
        # elements
        unit = math.gcd(abs(v), 16) if v else 1
        out[n] = int(v + unit * rng.integers(1, max(8, abs(v) // unit + 1)))
    return out


def _value(expr: str, sizes: dict[str, int]) -> int | None:
    try:
        return int(evaluate(expr, sizes))
    except SizeExprError:
        return None


def _expr(terms: list[tuple[int, tuple[str, ...]]], denominator: int = 1) -> str:
    """``(c1 * a * b + c2 * c ...) // denominator``: the largest products first, then the
    constant, subtracted terms last."""
    expr = ""
    for c, t in sorted(terms, key=lambda ct: (ct[0] < 0, -len(ct[1]))):
        if c == 0:
            continue
        body = " * ".join(t)
        mag = str(abs(c)) if not t else body if abs(c) == 1 else f"{abs(c)} * {body}"
        expr += (f" - {mag}" if c < 0 else f" + {mag}") if expr else (f"-{mag}" if c < 0
                                                                      else mag)
    expr = expr or "0"
    return f"({expr}) // {denominator}" if denominator > 1 else expr


def _linear_fit(buffer: str, moved: list[str], sizes: dict[str, int],
                samples: list[tuple[dict, dict]], runner: _Runner,
                coupled=(), rel: SizeRelations | None = None) -> str | None:
    """An integer combination of 1, each moved size, each product of two and the product of
    all, fitted on enough size sets (each keeping ``rel``) and verified on two more; None when
    none holds."""
    rel = rel or SizeRelations(dict(sizes))
    if len(moved) > 8:
        return None
    terms: list[tuple[str, ...]] = [()]
    for k in range(1, len(moved) + 1):  # products of ever more sizes, while few enough
        more = list(itertools.combinations(moved, k))
        if len(terms) + len(more) > MAX_TERMS and k > 2:
            terms.append(tuple(moved))
            break
        terms += more
    def matrix(rows):  # each column scaled to at most 1: products of sizes span 1e0..1e30
        m = np.array([[math.prod(s[n] for n in t) for t in terms] for s, _ in rows], float)
        return m / np.maximum(np.abs(m).max(axis=0), 1.0) if len(m) else m

    rows = [(s, e) for s, e in samples if e is not None]
    while runner.runs < MAX_RUNS and (len(rows) < len(terms) + 2 or np.linalg.matrix_rank(
            matrix(rows[:-2])) < len(terms)) and runner.seed < 2 + 4 * MAX_RUNS:
        at = rel.keep(_another(sizes, runner.seed, coupled))
        runner.seed += 1  # the next buffer's fit reuses these runs and makes new ones
        got = runner.extents(at)
        if got is not None:
            rows.append((at, got))
            samples.append((at, got))
    fit_rows = rows[:-2]  # the last two only verify
    if len(rows) < len(terms) + 2 or np.linalg.matrix_rank(matrix(fit_rows)) < len(terms):
        return None
    raw = np.array([[math.prod(s[n] for n in t) for t in terms] for s, _ in fit_rows], float)
    scale = np.maximum(np.abs(raw).max(axis=0), 1.0)
    y = np.array([e[buffer] for _, e in fit_rows], float)
    coef, *_ = np.linalg.lstsq(raw / scale, y, rcond=None)
    coef = coef / scale
    # byte strides give element extents like nb1 / 4: coefficients with a small denominator
    denominator = next((d for d in (1, 2, 4, 8, 16) if np.allclose(
        coef * d, np.rint(coef * d), atol=1e-6)), None)
    if denominator is None:
        return None
    ints = np.rint(coef * denominator).astype(int)
    expr = _expr(rel.rewrite([(int(c), t) for c, t in zip(ints.tolist(), terms, strict=True)
                              if c]), denominator)
    if any(_value(expr, s) != e[buffer] for s, e in rows):
        return None
    return expr
