"""Contracts a host keeps between sizes (issue 15), so that the size sets kport makes (the shape
probe's runs, a guessed case's second size set, the judge's held-out draws through
``check.constraints``) keep them too: llama.cpp's group norm is launched with ``ne_elements ==
num_groups * group_size``, its wkv with ``C == H * 64`` (the head size, a template constant)
and T a multiple of B.

Two sources: what the code states (a launch or the kernel divides one size by another, ``C /
H``, ``T / B``: a multiple, or a fixed product when the quotient is a template constant), and
what the given values show (a size equal to a product of two or more others, a size a proper
multiple of another). A value can agree by coincidence; keeping such a relation only
over-constrains the sizes kport tries.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field

MAX_FACTORS = 4  # a size equal to a product of more others is not looked for


@dataclass(frozen=True)
class Relation:
    """``size == coef * prod(factors)``, or with ``multiple`` ``size % factors[0] == 0``."""

    size: str
    factors: tuple[str, ...]
    coef: int = 1
    multiple: bool = False
    stated: bool = False  # read from the code, not only from the given values

    def text(self) -> str:
        """The relation as a case's ``check.constraints`` entry."""
        if self.multiple:
            return f"{self.size} % {self.factors[0]} == 0"
        product = " * ".join(([str(self.coef)] if self.coef != 1 else []) + list(self.factors))
        return f"{self.size} == {product}"

    def holds(self, sizes: dict[str, int]) -> bool:
        if self.multiple:
            b = sizes[self.factors[0]]
            return b != 0 and sizes[self.size] % b == 0
        return sizes[self.size] == self.coef * math.prod(sizes[f] for f in self.factors)


@dataclass(frozen=True)
class SizeRelations:
    """The relations among one case's sizes (``given``: the sizes they were found at)."""

    given: dict[str, int] = field(default_factory=dict)
    relations: tuple[Relation, ...] = ()

    def stated(self) -> SizeRelations:
        """Only the relations the code states."""
        return SizeRelations(self.given, tuple(r for r in self.relations if r.stated))

    def derived(self) -> dict[str, Relation]:
        """Each size a product relation computes from others."""
        return {r.size: r for r in self.relations if not r.multiple}

    def free(self) -> list[str]:
        """The sizes that move on their own (in the given order)."""
        derived = self.derived()
        return [n for n in self.given if n not in derived]

    def keep(self, proposal: dict[str, int]) -> dict[str, int]:
        """``proposal`` with every relation made to hold: a product recomputed from its
        factors, a multiple raised to the next multiple of its divisors. Sizes are settled in
        the order of their given values, so factors and divisors (always smaller) come
        first."""
        out = dict(proposal)
        derived = self.derived()
        divisors: dict[str, list[str]] = {}
        for r in self.relations:
            if r.multiple:
                divisors.setdefault(r.size, []).append(r.factors[0])
        for name in sorted(self.given, key=lambda n: self.given[n]):
            if name in derived:
                r = derived[name]
                out[name] = r.coef * math.prod(out[f] for f in r.factors)
                continue
            by = [out[d] for d in divisors.get(name, ()) if out[d] > 0]
            if not by or out[name] <= 0:
                continue
            unit = math.lcm(*by)
            if out[name] % unit:
                out[name] = (out[name] // unit + 1) * unit
        return out

    def rewrite(self, terms: list[tuple[int, tuple[str, ...]]]
                ) -> list[tuple[int, tuple[str, ...]]]:
        """Products of a fit over the free sizes written with the sizes they make (``64 * T *
        H`` is ``T * C`` where C == 64 * H); the value is the same wherever the relations
        hold."""
        derived = sorted(self.derived().values(), key=lambda r: -self.given[r.size])
        out = []
        for coef, names in terms:
            changed = True
            while changed:
                changed = False
                for r in derived:
                    have, need = Counter(names), Counter(r.factors)
                    if coef % r.coef == 0 and all(have[f] >= k for f, k in need.items()):
                        coef //= r.coef
                        names = tuple(sorted((have - need + Counter([r.size])).elements(),
                                             key=list(self.given).index))
                        changed = True
            out.append((coef, names))
        return out

    def describe(self, most: int = 8) -> str:
        """The relations for a person, at most ``most`` of the value multiples (strided
        layouts have dozens)."""
        multiples = [r for r in self.relations if r.multiple and not r.stated]
        shown = [r for r in self.relations if r not in multiples[most:]]
        more = len(multiples) - most
        return "; ".join(r.text() + ("" if r.stated else " (from the values)") for r in shown) \
            + (f"; and {more} more multiples (from the values)" if more > 0 else "")


def find_relations(sizes: dict[str, int], quotients=(), constants=()) -> SizeRelations:
    """The relations among ``sizes``: for each ``(a, b)`` of ``quotients`` (the code divides a
    by b) whose values divide, a multiple, or ``a == q * b`` when the quotient q is one of
    ``constants`` (the kernel's template ints); then from the values alone, each size equal to
    a product of two to MAX_FACTORS others of at least 2 (the fewest factors, then the first
    listed), and each size a proper multiple of another of at least 2."""
    found: list[Relation] = []
    derived: set[str] = set()
    for a, b in sorted(set(quotients), key=lambda ab: (list(sizes).index(ab[0]),
                                                      list(sizes).index(ab[1]))):
        va, vb = sizes[a], sizes[b]
        if vb < 2 or va <= vb or va % vb:
            continue
        if va // vb in constants and a not in derived:
            found.append(Relation(a, (b,), va // vb, stated=True))
            derived.add(a)
        else:
            found.append(Relation(a, (b,), multiple=True, stated=True))
    names = list(sizes)
    for d in sorted(names, key=lambda n: sizes[n]):
        if d in derived or sizes[d] < 4:
            continue
        others = [n for n in names if n != d and 2 <= sizes[n] < sizes[d]]
        most = MAX_FACTORS if len(others) <= 20 else 2  # many sizes: pairs only (stays cheap)
        best = next((fs for k in range(2, most + 1)
                     for fs in itertools.combinations(others, k)
                     if math.prod(sizes[f] for f in fs) == sizes[d]), None)
        if best is not None:
            found.append(Relation(d, best))
            derived.add(d)
    have = {(r.size, r.factors[0]) for r in found if r.multiple}
    for a in names:
        if a in derived:
            continue
        for b in names:
            if b != a and 2 <= sizes[b] < sizes[a] and sizes[a] % sizes[b] == 0 and \
                    (a, b) not in have:
                found.append(Relation(a, (b,), multiple=True))
    return SizeRelations(dict(sizes), tuple(found))
