"""runners/mlx_metal on a machine without Metal: it imports, says it is unavailable and refuses
to time. Its hardware paths run in test_metal_conformance.py on a Mac."""

import mlx.core as mx
import numpy as np
import pytest

from runners import mlx_metal

needs_no_metal = pytest.mark.skipif(mx.metal.is_available(), reason="this machine has Metal")


def test_import_works_and_available_matches_mlx():
    assert mlx_metal.available() is bool(mx.metal.is_available())


@needs_no_metal
def test_available_is_false_without_metal():
    assert mlx_metal.available() is False


@needs_no_metal
def test_benchmark_says_timing_needs_apple_silicon():
    kernel = mlx_metal.metal_kernel("copy", ["x"], ["y"], "y[0] = x[0];")
    with pytest.raises(RuntimeError, match="Apple Silicon"):
        mlx_metal.benchmark(kernel, lambda: [mx.zeros((1,))], output_shapes=[(1,)],
                            output_dtypes=[mx.float32], grid=(1, 1, 1), threadgroup=(1, 1, 1))


@needs_no_metal
def test_launch_says_it_needs_apple_silicon():
    kernel = mlx_metal.metal_kernel("copy", ["x"], ["y"], "y[0] = x[0];")
    with pytest.raises(RuntimeError, match="Apple Silicon"):
        kernel.launch(inputs=[mx.zeros((1,))], output_shapes=[(1,)], output_dtypes=[mx.float32],
                      grid=(1, 1, 1), threadgroup=(1, 1, 1))


def test_generated_source_is_the_signature_mlx_writes():
    """The record's source mirrors MLX's text: scalars by constant reference, template header and
    instantiation, shape buffers; no data is read, so this runs anywhere."""
    kernel = mlx_metal.metal_kernel("k", ["x", "alpha", "n"], ["y"],
                                    "y[thread_position_in_grid.x] = T(alpha) * x[0] + x_shape[0];")
    text = kernel.generated_source([mx.zeros((4096, 2)), 2.5, 7], [mx.float16],
                                   [("T", mx.float16), ("N", 4), ("B", True)])
    assert "template <typename T, int N, bool B>" in text
    assert "const device float* x [[buffer(0)]]" in text
    assert "const constant int* x_shape [[buffer(1)]]" in text
    assert "const constant float& alpha [[buffer(2)]]" in text
    assert "const constant int32_t& n [[buffer(3)]]" in text
    assert "device float16_t* y [[buffer(4)]]" in text
    assert text.rstrip().endswith("custom_kernel_k__float16_t_4_1_float_floats_int32_ts_float16_t"
                                  "<float16_t, 4, 1>;")


def _faked(monkeypatch, behaviour):
    """An mlx_metal kernel whose MLX call is ``behaviour``, on a machine that claims Metal."""
    monkeypatch.setattr(mlx_metal, "available", lambda: True)
    kernel = mlx_metal.metal_kernel("k", ["x"], ["y"], "y[thread_position_in_grid.x] = x[0];")
    kernel._kernel = behaviour
    return kernel


LAUNCH = dict(output_shapes=[(4,)], output_dtypes=[mx.float32], grid=(4, 1, 1),
              threadgroup=(4, 1, 1))


def test_a_build_error_becomes_a_record(monkeypatch):
    message = "[metal::Device] Unable to build metal library from source\nprogram_source:9: error"

    def reject(**_):
        raise RuntimeError(message)

    run = _faked(monkeypatch, reject).launch(inputs=[mx.zeros((4,))], **LAUNCH)
    assert not run.compiled and not run.ok and not run.outputs
    assert run.diagnostics[0].message == message
    assert "[[kernel]] void custom_kernel_k_floatc_float(" in run.source  # 4 elements: constant


def test_other_errors_still_raise(monkeypatch):
    def broken(**_):
        raise RuntimeError("[metal::Device] Unable to create new command buffer")

    with pytest.raises(RuntimeError, match="command buffer"):
        _faked(monkeypatch, broken).launch(inputs=[mx.zeros((4,))], **LAUNCH)


def test_launch_returns_evaluated_outputs_and_no_findings(monkeypatch):
    run = _faked(monkeypatch, lambda inputs, **_: [inputs[0] + 1]).launch(
        inputs=[mx.zeros((4,))], **LAUNCH)
    assert run.ok and run.findings == []
    assert run.outputs[0].tolist() == [1.0] * 4


def test_launch_with_reps_fills_the_records_timing(monkeypatch):
    calls = []

    def kernel(inputs, **_):
        calls.append(inputs[0])
        return [inputs[0] + 1]

    faked = _faked(monkeypatch, kernel)
    assert faked.launch(inputs=[mx.zeros((4,))], **LAUNCH).timing is None
    calls.clear()
    run = faked.launch(inputs=[mx.zeros((4,))], reps=3, **LAUNCH)
    assert run.ok and run.outputs[0].tolist() == [1.0] * 4
    assert len(calls) == 1 + 1 + 3  # the recorded launch, one warm-up, three timed
    assert run.timing.reps == 3 and 0 < run.timing.min_s <= run.timing.median_s


def test_benchmark_times_fresh_inputs_after_warmup(monkeypatch):
    made, seen = [], []

    def make_inputs():
        made.append(mx.full((4,), float(len(made))))
        return [made[-1], 2.5]

    def kernel(inputs, **_):
        seen.append(inputs[0])
        return [inputs[0] * inputs[1]]

    result = mlx_metal.benchmark(_faked(monkeypatch, kernel), make_inputs, warmup=2, reps=5,
                                 **LAUNCH)
    assert result.reps == 5 and len(made) == len(seen) == 7
    assert all(a is b for a, b in zip(made, seen, strict=True))
    assert 0 < result.min_s <= result.median_s


@pytest.mark.skipif(not mlx_metal.available(), reason="mlx_metal needs Apple Silicon with Metal")
def test_benchmark_on_the_gpu():
    from evals.conformance_metal import METAL_CASES

    case = METAL_CASES[0]
    kernel = mlx_metal.metal_kernel(case.name, list(case.input_names), list(case.output_names),
                                    case.source)
    rng = np.random.default_rng(0)
    result = mlx_metal.benchmark(kernel, lambda: case.make(rng), warmup=1, reps=3,
                                 output_shapes=list(case.output_shapes),
                                 output_dtypes=list(case.output_dtypes), grid=case.grid,
                                 threadgroup=case.threadgroup)
    assert result.reps == 3 and 0 < result.min_s <= result.median_s
