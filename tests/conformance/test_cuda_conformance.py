"""Every CUDA runner on this machine must pass the same conformance cases.

cuda_sim runs everywhere; cuda_gpu runs only where an NVIDIA GPU is present and skips elsewhere.
"""

import numpy as np
import pytest

from evals.conformance import CASES, run_case
from runners import cuda_gpu, cuda_sim

RUNNERS = [
    pytest.param(cuda_sim.RawKernel, id="cuda_sim"),
    pytest.param(cuda_gpu.RawKernel, id="cuda_gpu", marks=pytest.mark.skipif(
        not cuda_gpu.available(), reason="cuda_gpu needs an NVIDIA GPU and nvcc")),
]


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_matches_the_numpy_reference(case, runner):
    inputs, args, record = run_case(case, runner, seed=1)
    assert record.compiled, record
    if runner is cuda_sim.RawKernel:
        assert bool(record.findings) == case.expect_findings, record.findings
        if case.expect_findings:
            return
    for index, expected in case.expect(inputs).items():
        np.testing.assert_allclose(args[index], expected, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: argument {index}")


def test_fresh_seeds_give_fresh_inputs():
    a, _, _ = run_case(CASES[0], cuda_sim.RawKernel, seed=2)
    b, _, _ = run_case(CASES[0], cuda_sim.RawKernel, seed=3)
    assert not np.array_equal(a[0], b[0])
