"""The simulator benchmark (evals/bench_sim.py) at --quick sizes: every kernel runs correctly in
PoCL, cuda_sim and metal_sim under the default check modes, and a wrong output is never timed. No
timing is asserted. Skips only where PoCL (the `bench` extra) is not installed."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pyopencl", reason="PoCL is not installed: pip install -e '.[bench]'")
pytest.importorskip("pocl_binary_distribution",
                    reason="PoCL is not installed: pip install pocl-binary-distribution")

from evals import bench_sim  # noqa: E402 - after the skips
from evals.bench_kernels import NAMES, make_case  # noqa: E402


def test_quick_run_times_every_kernel_correctly(capsys, monkeypatch):
    monkeypatch.setenv("KPORT_SIM_CHECKS", "full")  # main() sets it per mode; restored after
    assert bench_sim.main(["--quick", "--only", "speed", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    assert "PoCL comparison not measured" not in out, out
    for checks in ("fast", "bounds", "full"):
        table = out.split(f"checks: {checks}\n", 1)[1].split("geomean", 1)[0]
        for name in NAMES:
            cells = next(ln for ln in table.splitlines() if ln.startswith(name + " ")).split()
            assert len(cells) == 6 and "-" not in cells, f"{checks} {name}: {cells}"
        assert "wrong output" not in table and "run failed" not in table, table
    assert out.count("geomean") == 3


def test_rows_carry_all_three_runtimes(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_CHECKS", "full")
    rows = bench_sim.speed(1, ("fast",), ("scan", "flash_attn"), quick=True)
    assert [r.name for r in rows] == ["scan", "flash_attn"]
    for row in rows:
        assert not row.problems, row.problems
        assert set(row.seconds) == {"PoCL", "cuda_sim", "metal_sim"}
        assert row.ratio("cuda_sim") > 0 and row.ratio("metal_sim") > 0


@pytest.mark.parametrize("timer", ["cuda_sim", "metal_sim", "PoCL"])
def test_a_wrong_output_is_reported_and_not_timed(timer):
    case = make_case("softmax", np.random.default_rng(1), quick=True)
    wrong = dataclasses.replace(case, want=case.want + 0.5)
    run = {"cuda_sim": bench_sim.time_cuda_sim, "metal_sim": bench_sim.time_metal_sim,
           "PoCL": bench_sim.Pocl().time}[timer]
    row = bench_sim.Row("softmax", "fast")
    bench_sim.measure(row, timer, run, wrong, 1)
    assert timer not in row.seconds and row.problems[timer].startswith("wrong output"), row
    bench_sim.measure(row, timer, run, case, 1)
    assert row.seconds[timer] > 0


def test_check_modes_are_settings_values():
    assert bench_sim.check_modes("both") == ("fast", "full")
    assert bench_sim.check_modes("fast, bounds+race ,full,fast") == ("fast", "bounds,race", "full")
    assert bench_sim.check_modes("bounds+race+uninit") == ("full",)
    with pytest.raises(Exception, match="'fats'"):
        bench_sim.check_modes("fast,fats")
