"""KPORT_SIM_CHECKS picks the checks a checked launch makes: bounds, race, uninit, any list of
them, or full (all three). One kernel with one finding of each kind shows that each mode reports
its own kinds and only those, in work-item loops (with and without barriers) and in the plain
thread loop."""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel

# Line 5 reads u, which no thread wrote, and s[63 - t]: threads 0-31 read it before its writer
# ran (uninitialised), threads 32-63 after another thread wrote it (a race). Line 6 writes past
# the end of `out` (64 elements). Without the uninit check, the first half's reads count as
# reads, and threads 32-63 then overwrite what another thread read: a race at line 4 too.
LOOP = r"""extern "C" __global__ void bad(int* out) {
  __shared__ int s[64], u[64];
  int t = threadIdx.x;
  s[t] = t;
  out[t] = s[63 - t] + u[t];
  out[t + 64] = 1;
}"""
# The same findings between two barriers: the kernel runs in work-item loops.
REGIONS = LOOP.replace("  s[t] = t;\n", "  __syncthreads(); s[t] = t;\n").replace(
    "  out[t + 64] = 1;\n", "  out[t + 64] = 1; __syncthreads();\n")

FOUND = {"bounds": {("out_of_bounds", 6)}, "race": {("race", 5)},
         "uninit": {("uninitialized", 5)}}


@pytest.mark.parametrize("source, work_items, mode", [
    (LOOP, "off", "thread loop"), (LOOP, "auto", "work-item loops"),
    (REGIONS, "auto", "work-item loops")])
@pytest.mark.parametrize("checks", ["full", "bounds", "race", "uninit", "bounds,race",
                                    "race,uninit"])
def test_each_mode_reports_its_own_kinds(monkeypatch, source, work_items, mode, checks):
    monkeypatch.setenv("KPORT_SIM_CHECKS", checks)
    monkeypatch.setenv("KPORT_SIM_WORK_ITEMS", work_items)
    run = RawKernel(source, "bad").launch((1,), (64,), (np.zeros(64, np.int32),))
    assert run.compiled and run.mode == mode, (run.diagnostics, run.mode)
    names = FOUND if checks == "full" else checks.split(",")
    want = set().union(*(FOUND[c] for c in names))
    if "race" in names and "uninit" not in names:
        want.add(("race", 4))
    assert {(f.kind, f.line) for f in run.findings} == want, run.findings


def test_fast_builds_no_hooks_and_keeps_the_canaries(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_CHECKS", "fast")
    run = RawKernel(LOOP, "bad").launch((1,), (64,), (np.zeros(64, np.int32),))
    assert run.compiled and not run.ok
    assert {f.kind for f in run.findings} == {"out_of_bounds"}, run.findings
    assert all(f.line != 5 for f in run.findings)
