"""Every Metal runner runners.get knows must pass the same conformance cases.

metal_sim runs everywhere; mlx_metal runs only on Apple Silicon with Metal and skips elsewhere.
"""

import numpy as np
import pytest

import runners
from evals.conformance_metal import METAL_CASES, run_metal_case, to_numpy
from runners.base import NAMES

RUNNERS = [pytest.param(runners.get(n), id=n) for n in NAMES
           if runners.get(n).language == "metal"]


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", METAL_CASES, ids=[c.name for c in METAL_CASES])
def test_case_matches_the_numpy_reference(case, runner):
    if not runner.available():
        pytest.skip(runner.reason())
    inputs, record = run_metal_case(case, runner, seed=1)
    assert record.ok, (record.diagnostics, record.findings)
    expected = case.expected(inputs)
    assert len(record.outputs) == len(expected) == len(case.output_names)
    for name, got, want in zip(case.output_names, record.outputs, expected, strict=True):
        got = to_numpy(got)
        assert got.shape == tuple(want.shape), f"{case.name}: output {name}"
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: output {name}")


def test_the_cases_have_unique_names_and_fresh_inputs_per_seed():
    assert len({c.name for c in METAL_CASES}) == len(METAL_CASES) >= 12
    a = METAL_CASES[0].make(np.random.default_rng(2))
    b = METAL_CASES[0].make(np.random.default_rng(3))
    assert not np.array_equal(to_numpy(a[0]), to_numpy(b[0]))
