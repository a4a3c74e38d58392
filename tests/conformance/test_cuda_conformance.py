"""Every CUDA runner runners.get knows must pass the same conformance cases.

cuda_sim runs everywhere; cuda_gpu runs only where an NVIDIA GPU is present and skips elsewhere.
"""

import numpy as np
import pytest

import runners
from evals.conformance import CASES, run_case
from runners.base import NAMES

RUNNERS = [pytest.param(runners.get(n), id=n) for n in NAMES if runners.get(n).language == "cuda"]


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_matches_the_numpy_reference(case, runner):
    if not runner.available():
        pytest.skip(runner.reason())
    inputs, args, record = run_case(case, runner, seed=1)
    assert record.compiled, record
    if not runner.hardware:  # only the simulator has sanitizers
        assert bool(record.findings) == case.expect_findings, record.findings
        if case.expect_findings:
            return
    for index, expected in case.expect(inputs).items():
        np.testing.assert_allclose(args[index], expected, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: argument {index}")


def test_fresh_seeds_give_fresh_inputs():
    a, _, _ = run_case(CASES[0], runners.get("cuda_sim"), seed=2)
    b, _, _ = run_case(CASES[0], runners.get("cuda_sim"), seed=3)
    assert not np.array_equal(a[0], b[0])
