"""Honest ports still get in: every expert port of the corpus is accepted by the harness, with
the allow-list, the jail, the lockdown and a held-out size set of each run in force."""

import pytest

from agent.harness import judge
from corpus.cases import discover

CASES = [c for c in discover() if c.metal is not None]
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_expert_port_is_accepted(case):
    body = (case.folder / case.metal.source).read_text()
    header = (case.folder / case.metal.header).read_text() if case.metal.header else ""
    verdict = judge(case, body, header, seeds=3, timeout=300)
    assert verdict.accepted, verdict.reasons
    assert verdict.isolation.startswith("bubblewrap")
    held_out = [r for r in verdict.runs if r["held_out"]]
    listed = case.size_sets()
    varies = any(len({s[k] for s in listed}) > 1 for k in case.sizes)
    assert len(held_out) == (1 if varies else 0)
    assert all(r["sizes"] not in listed for r in held_out)
