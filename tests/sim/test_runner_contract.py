"""Every runner runners.get knows keeps one contract (runners/base.py): the same Runner fields,
kernels made with the language's own constructor, and one launch record type with outputs,
findings and timing. Runners this machine cannot run skip with the runner's own reason."""

import ast
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

import runners
from runners.base import NAMES, LaunchRecord, Runner, Timing
from runners.errors import KportError, UnknownRunner

RUNNERS_DIR = Path(runners.__file__).parent
HARDWARE = {"cuda_sim": False, "metal_sim": False, "cuda_gpu": True, "mlx_metal": True}
N = 64
CUDA_ADD = """extern "C" __global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}"""
METAL_ADD = "uint i = thread_position_in_grid.x;\ny[i] = x[i] + 1.0f;"


def _runner(name: str) -> Runner:
    runner = runners.get(name)
    if not runner.available():
        pytest.skip(runner.reason())
    return runner


def _launch(runner: Runner, source: str, reps: int = 0) -> tuple[LaunchRecord, np.ndarray]:
    """Launch ``source`` (an add-one kernel, or a broken one) on N floats; (record, input)."""
    timed = {"reps": reps} if reps else {}
    x = np.arange(N, dtype=np.float32)
    if runner.language == "cuda":
        kernel = runner.kernel(source, "add_one")
        return kernel.launch((N // 32,), (32,), [x, np.int32(N)], **timed), x
    kernel = runner.kernel("add_one", ["x"], ["y"], source)
    return kernel.launch(inputs=[mx.array(x)], output_shapes=[(N,)],
                         output_dtypes=[mx.float32], grid=(N, 1, 1), threadgroup=(32, 1, 1),
                         **timed), x


@pytest.mark.parametrize("name", NAMES)
def test_every_named_runner_has_the_contract_fields(name):
    runner = runners.get(name)
    assert isinstance(runner, Runner) and runner.name == name
    assert runner.language in ("cuda", "metal") and runner.hardware is HARDWARE[name]
    assert callable(runner.kernel) and isinstance(runner.available(), bool)
    # a runner that cannot run says why, in words a person can act on
    assert (runner.reason() == "") is runner.available()
    assert runner.needs or not runner.hardware


def test_every_module_defining_a_runner_is_named():
    defining = set()
    for path in [*RUNNERS_DIR.glob("*.py"), *RUNNERS_DIR.glob("*/__init__.py")]:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "RUNNER"
                                                    for t in node.targets):
                defining.add(path.stem if path.stem != "__init__" else path.parent.name)
    assert defining == set(NAMES)


def test_an_unknown_runner_names_the_known_ones():
    with pytest.raises(UnknownRunner) as err:
        runners.get("cuda_emulator")
    assert isinstance(err.value, KportError)
    assert "cuda_emulator" in str(err.value) and all(n in str(err.value) for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_launch_returns_the_one_record(name):
    runner = _runner(name)
    reps = 3 if runner.hardware else 0
    record, x = _launch(runner, CUDA_ADD if runner.language == "cuda" else METAL_ADD, reps)
    assert isinstance(record, LaunchRecord)
    assert record.compiled and record.ok and record.findings == [] and record.error == ""
    assert "x" in record.source and len(record.outputs) == 1
    np.testing.assert_array_equal(np.array(record.outputs[0]), np.arange(N) + 1.0)
    if runner.language == "cuda":
        assert record.outputs[0] is x  # the caller's own array, written in place
    if runner.hardware:
        assert isinstance(record.timing, Timing) and record.timing.reps == reps
        assert 0 < record.timing.min_s <= record.timing.median_s
    else:
        assert record.timing is None and record.kernel_s > 0  # simulated time: no timing


@pytest.mark.parametrize("name", [n for n in NAMES if not HARDWARE[n]])
def test_a_simulator_reports_a_fault_as_findings_in_the_record(name):
    runner = runners.get(name)
    bad = (CUDA_ADD.replace("x[i] += 1.0f", "x[i + n] += 1.0f") if runner.language == "cuda"
           else METAL_ADD.replace("y[i] = x[i]", "y[i + 64] = x[i]"))
    record, _ = _launch(runner, bad)
    assert isinstance(record, LaunchRecord) and record.compiled and not record.ok
    assert {f.kind for f in record.findings} == {"out_of_bounds"}


@pytest.mark.parametrize("name", NAMES)
def test_a_compile_error_is_a_record_too(name):
    runner = _runner(name)
    broken = (CUDA_ADD if runner.language == "cuda" else METAL_ADD).replace("1.0f;", "1.0f")
    record, _ = _launch(runner, broken)
    assert isinstance(record, LaunchRecord)
    assert not record.compiled and not record.ok and record.diagnostics and not record.outputs


def test_cuda_gpu_reads_nvccs_messages_as_diagnostics():
    """cuda_gpu runs only on NVIDIA machines; its reading of nvcc's log is tested anywhere."""
    from runners.cuda_gpu import _diagnostics

    log = ('kernel.cu(4): error: expected a ";"\n'
           'kernel.cu(2): warning #177-D: variable "q" was declared but never referenced\n\n'
           '1 error detected in the compilation of "/tmp/k/kernel.cu".\n')
    assert [str(d) for d in _diagnostics(log)] == [
        'kernel.cu:4:0: error: expected a ";"',
        'kernel.cu:2:0: warning: variable "q" was declared but never referenced']
    assert _diagnostics("nvcc fatal   : Unsupported gpu architecture")[0].severity == "error"
