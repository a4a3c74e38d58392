"""Re-tiling a port over Apple's 32 KB of threadgroup memory (issue 16, agent/retile.py): a
tiling template parameter is halved until the tiles fit; a problem size or a launch parameter is
never touched, and the oracle judges the result like any candidate."""

from __future__ import annotations

import pytest

from agent.retile import LIMIT, footprint, retile
from corpus.candidate import Candidate
from corpus.cases import discover
from tests.cli import kport

BODY = """constexpr int CHUNK = NTHREADS * NITEMS, kWarps = NTHREADS / 32;
threadgroup float s_u[CHUNK], s_dt[CHUNK];
threadgroup float s_B[NSTATE][CHUNK];
threadgroup float2 s_warp[NSTATE][kWarps];
out[0] = s_u[0];"""


def _candidate(template: dict, threadgroup=(64, 1, 1)) -> Candidate:
    return Candidate(body=BODY, inputs=["x"], outputs=["out"], grid=["n * 64", 1, 1],
                     threadgroup=list(threadgroup), template=template, origin="translator")


def test_the_footprint_counts_every_declarator_at_the_template_values():
    # 2 * 4 * CHUNK + 4 * NSTATE * CHUNK + 8 * NSTATE * 2, CHUNK = 64 * NITEMS
    assert footprint(BODY, {"NTHREADS": 64, "NITEMS": 8, "NSTATE": 16}) == \
        2 * 4 * 512 + 4 * 16 * 512 + 8 * 16 * 2
    assert footprint("threadgroup float s[n];", {}) is None  # not a size kport can read


def test_a_tiling_parameter_is_halved_until_the_tiles_fit():
    fixed = retile(_candidate({"NTHREADS": 64, "NITEMS": 8, "NSTATE": 32}), case=None)
    assert fixed is not None and fixed.template == {"NTHREADS": 64, "NITEMS": 2, "NSTATE": 32}
    assert footprint(BODY, fixed.template) <= LIMIT < footprint(BODY, {
        "NTHREADS": 64, "NITEMS": 4, "NSTATE": 32})
    assert "NITEMS 8 -> 2" in fixed.origin


def test_problem_sizes_and_launch_parameters_are_not_retiled():
    # NSTATE (a state count) is no tiling name; an ITEMS parameter in the launch is left too
    assert retile(_candidate({"NTHREADS": 64, "NITEMS": 1, "NSTATE": 128}), None) is None
    launched = _candidate({"NTHREADS": 64, "NITEMS": 8, "NSTATE": 16},
                          threadgroup=("NITEMS * 8", 1, 1))
    assert retile(launched, None) is None


@pytest.mark.slow
def test_the_mamba_scan_case_ports_offline_retiled(tmp_path):
    """corpus 041: 35 KB of CUDA shared tiles; the port halves NITEMS and is correct."""
    case = next(c for c in discover() if c.id == "041_mamba1_selective_scan_fwd")
    proc = kport("port", str(case.folder / case.cuda.source), "--kernel", case.cuda.kernel,
                 "--case", str(case.folder), "--offline", "--no-kb", "--out",
                 str(tmp_path / "pkg"))
    assert proc.returncode == 0 and "ACCEPTED" in proc.stdout, proc.stdout + proc.stderr
    report = (tmp_path / "pkg" / "report.md").read_text()
    assert "re-tiled, NITEMS 4 -> 2" in report
