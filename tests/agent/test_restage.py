"""Staging a tile in another's storage when a port is over Apple's 32 KB (issue 16,
agent/restage.py): V loaded into K's storage after K's last reader, between barriers; refused
whenever a condition it relies on does not hold, and judged by the oracle like any candidate."""

from __future__ import annotations

import pytest

from agent.repairs import fit_threadgroup_memory
from agent.restage import share_storage
from agent.retile import LIMIT, footprint
from agent.translate import translate_kernel
from corpus.candidate import Candidate
from corpus.cases import discover
from corpus.port_check import check_translation
from tests.cli import kport

# Q 8 KB + K 16.1 KB + V 16 KB at D = 128: 40 KB
BODY = """constexpr int BK = 32;
threadgroup float Qs[16][D];
threadgroup float Ks[BK][D + 1];
threadgroup float Vs[BK][D];
float acc = 0.0f;
for (int kv0 = 0; kv0 < n; kv0 += BK) {
  threadgroup_barrier(mem_flags::mem_threadgroup);  // the last tile's readers are done
  for (int i = tid; i < BK * D; i += 128) {
    const int r = i / D, c = i % D;
    Ks[r][c] = k[kv0 * D + i];
    Vs[r][c] = v[kv0 * D + i];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float s = 0.0f;
  for (int d = 0; d < D; ++d) s += Qs[0][d] * Ks[tid % BK][d];
#pragma unroll 4
  for (int j = 0; j < BK; ++j) acc += s * Vs[j][tid % D];
}
o[tid] = acc;
"""

SHARED = """constexpr int BK = 32;
threadgroup float Qs[16][D];
threadgroup float Ks[BK][D + 1];
// kport: Vs is staged in Ks's storage (over 32 KB otherwise)
float acc = 0.0f;
for (int kv0 = 0; kv0 < n; kv0 += BK) {
  threadgroup_barrier(mem_flags::mem_threadgroup);  // the last tile's readers are done
  for (int i = tid; i < BK * D; i += 128) {
    const int r = i / D, c = i % D;
    Ks[r][c] = k[kv0 * D + i];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float s = 0.0f;
  for (int d = 0; d < D; ++d) s += Qs[0][d] * Ks[tid % BK][d];
  threadgroup_barrier(mem_flags::mem_threadgroup);  // kport: Ks's readers are done
  for (int i = tid; i < BK * D; i += 128) {
    const int r = i / D, c = i % D;
    Ks[r][c] = v[kv0 * D + i];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
#pragma unroll 4
  for (int j = 0; j < BK; ++j) acc += s * Ks[j][tid % D];
}
o[tid] = acc;
"""


def _candidate(body: str = BODY, d: int = 128, header: str = "") -> Candidate:
    return Candidate(body=body, header=header, inputs=["k", "v", "n"], outputs=["o"],
                     grid=[128, 1, 1], threadgroup=[128, 1, 1], template={"D": d},
                     origin="translator")


def test_the_second_tile_is_loaded_into_the_first_after_its_last_reader():
    fixed = share_storage(_candidate(), None)
    assert fixed is not None and fixed.body == SHARED
    assert footprint(SHARED, {"D": 128}) == 8192 + 16512 <= LIMIT < footprint(BODY, {"D": 128})
    assert fixed.origin == ("detail:Vs staged in Ks's storage after Ks's last reader: "
                            "threadgroup memory 41088 -> 24704 bytes")
    assert fit_threadgroup_memory(_candidate(), None).body == SHARED  # the repair table's entry


@pytest.mark.parametrize("change", [
    # a break bound by a loop inside the statements between the loads and V's reader
    ("s += Qs[0][d] * Ks[tid % BK][d];",
     "{ s += Qs[0][d] * Ks[tid % BK][d]; if (s > 1e30f) break; }"),
    # a store loop stepping its counter with ++, its start a call
    ("for (int i = tid; i < BK * D; i += 128)", "for (int i = min(tid, 0); i < BK * D; ++i)"),
])
def test_it_applies_to_variations_that_keep_the_conditions(change):
    old, new = change
    assert old in BODY
    assert share_storage(_candidate(BODY.replace(old, new)), None) is not None


@pytest.mark.parametrize("change", [
    # K still read after V's first reader: its storage is not free
    ("acc += s * Vs[j][tid % D];", "acc += s * Vs[j][tid % D] + Ks[j][0];"),
    # no barrier before the store loop: the next tile's K would overwrite V under its readers
    ("  threadgroup_barrier(mem_flags::mem_threadgroup);  // the last tile's readers are done\n",
     ""),
    # no barrier after it
    ("  }\n  threadgroup_barrier(mem_flags::mem_threadgroup);\n  float s", "  }\n  float s"),
    # a barrier that does not order threadgroup memory
    ("  }\n  threadgroup_barrier(mem_flags::mem_threadgroup);\n",
     "  }\n  threadgroup_barrier(mem_flags::mem_none);\n"),
    # element types differ (still over 32 KB with K in half)
    ("threadgroup float Ks[BK][D + 1];", "threadgroup half Ks[BK][D + 1];"),
    # K smaller than V in a dimension
    ("threadgroup float Ks[BK][D + 1];", "threadgroup float Ks[BK][D - 1];"),
    # V read outside the loop, or through its address
    ("o[tid] = acc;", "o[tid] = acc + Vs[0][0];"),
    ("acc += s * Vs[j][tid % D];", "acc += s * *(&Vs[j][0] + tid % D);"),
    # between the loads and V's reader: a name the store loop reads changes, or control leaves
    ("  float s = 0.0f;\n", "  float s = 0.0f;\n  v += D;\n"),
    ("  float s = 0.0f;\n", "  float s = 0.0f;\n  const uint tid = 0;\n"),
    ("  float s = 0.0f;\n", "  float s = 0.0f;\n  if (tid > n) continue;\n"),
    # the store loop does more than store the two tiles
    ("    Vs[r][c] = v[kv0 * D + i];\n", "    Vs[r][c] = v[kv0 * D + i];\n    o[i] = 0;\n"),
    ("Vs[r][c] = v[kv0 * D + i];", "Vs[r][c] = v[kv0 * D + i++];"),
    ("for (int i = tid; i < BK * D; i += 128)", "for (i = tid; i < BK * D; i += 128)"),
    ("for (int i = tid; i < BK * D; i += 128)", "for (int i = tid; i < BK * D; i += 128, m++)"),
])
def test_it_refuses_when_a_condition_does_not_hold(change):
    old, new = change
    assert old in BODY
    assert share_storage(_candidate(BODY.replace(old, new)), None) is None


def test_it_leaves_ports_that_fit_or_a_header_that_names_a_tile():
    assert share_storage(_candidate(d=64), None) is None  # 20 KB: nothing to repair
    assert share_storage(_candidate(header="#define VS(r, c) Vs[r][c]\n"), None) is None


def _flash_attention():
    case = discover(ids=["039"])[0]
    tr = translate_kernel((case.folder / case.cuda.source).read_text(), case.cuda.kernel,
                          roles={a.name: a.role for a in case.args}, grid=case.cuda.grid,
                          block=case.cuda.block, where=str(case.folder))
    return case, share_storage(Candidate.from_translation(tr), case)


def test_each_barrier_it_relies_on_is_needed_the_oracle_sees_a_race_without_one():
    """corpus 039 staged: correct; without any one of the three barriers around the two loads,
    the simulator reports a race on the shared tile, so a wrong staging fails the check."""
    case, fixed = _flash_attention()
    assert all(o.metal == "ok" for o in check_translation(case, fixed, seeds=1))
    top = "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);  // every"
    added = "threadgroup_barrier(mem_flags::mem_threadgroup);  // kport: Ks's readers are done"
    after = "    }\n    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    for old, new in [(top, "// every"), (added, ""), (after, "    }\n")]:
        assert fixed.body.count(old) == 1
        broken = fixed.model_copy(update={"body": fixed.body.replace(old, new)})
        outcomes = check_translation(case, broken, seeds=1)
        assert any("race on threadgroup variable 'Ks'" in n for o in outcomes for n in o.notes)


@pytest.mark.slow
def test_flash_attention_d128_ports_offline_staged(tmp_path):
    """corpus 039: 42 KB of tiles; `kport port --offline` stages V in K's storage, ACCEPTED."""
    case = discover(ids=["039"])[0]
    proc = kport("port", str(case.folder / case.cuda.source), "--kernel", case.cuda.kernel,
                 "--case", str(case.folder), "--offline", "--no-kb", "--out",
                 str(tmp_path / "pkg"))
    assert proc.returncode == 0 and "ACCEPTED" in proc.stdout, proc.stdout + proc.stderr
    report = (tmp_path / "pkg" / "report.md").read_text()
    assert "Vs staged in Ks's storage after Ks's last reader" in report
