"""Test tiers. `pytest -m "not slow"` is the quick tier for the edit-test loop; the README's
command (CI) runs everything.

A test is slow when it sweeps a whole corpus (every case, rule example or attack), kills or races
processes, starts a service (a Chroma server, Ray, Chromium, tmux), builds the whole knowledge
base or drives a command end to end through several ports. Where a test is parametrised over a
corpus, the quick tier keeps an evenly spread sample of it (``sampled``), so every area is still
exercised on every edit.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

SLOW = pytest.mark.slow


def sampled(values: Iterable, ids: Iterable[str], every: int) -> list:
    """``values`` as pytest params with ``ids``: one in ``every`` (by position, the first
    included) in the quick tier, the others marked slow."""
    return [pytest.param(value, id=name, marks=() if n % every == 0 else SLOW)
            for n, (value, name) in enumerate(zip(values, ids, strict=True))]
