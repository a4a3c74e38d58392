"""Every bundled corpus case passes its checks in the simulators (as `kport corpus check`)."""

import pytest

from corpus.cases import discover
from corpus.check import check_case
from tests.tiers import sampled

CASES = discover()


def test_the_corpus_is_not_empty():
    assert CASES, "corpus/cases holds no case"


@pytest.mark.parametrize("case", sampled(CASES, [c.id for c in CASES], every=6))
def test_case_passes(case):
    failed = [o for o in check_case(case, seeds=1) if not o.ok]
    assert not failed, "; ".join(f"{o.sizes} seed {o.seed}: cuda={o.cuda} metal={o.metal} "
                                 f"{' | '.join(o.notes)}" for o in failed)
