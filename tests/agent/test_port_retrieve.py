"""Retrieval for a port from a tiny KB: analogues never include the case's own expert pair
(leave-one-out) and show the lines of theirs that do the kernel's work; the report names the
rules at each line; a missing KB is built on first use, one that cannot be built is reported,
not fatal; --learn adds an accepted port."""

import re
import time
from pathlib import Path

import pytest

from agent.nodes.retrieve import analogues
from agent.state import PortContext
from corpus.cases import discover

CASES = ("001", "005", "011", "012")


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory):
    """A KPORT_HOME whose KB holds the corpus pairs of CASES (built once: embedding is slow)."""
    from kb.ingest import case_chunks
    from kb.store import KBStore

    home = tmp_path_factory.mktemp("port-kb-home")
    KBStore(home / "kb", create=True).add(
        [c for case in discover(ids=list(CASES)) for c in case_chunks(case)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KPORT_HOME", str(home))
        yield home


def ctx_for(case_id: str, use_kb: bool = True) -> PortContext:
    case = discover(ids=[case_id])[0]
    return PortContext(case=case, src=(case.folder / case.cuda.source).read_text(),
                       kernel=case.cuda.kernel, use_kb=use_kb,
                       deadline=time.monotonic() + 300)


def test_analogues_leave_the_cases_own_pair_out(kb_home):
    ctx = ctx_for("012")
    pairs, note = analogues(ctx, ctx.src)
    assert pairs and all(p["case"] != "012_softmax_online" for p in pairs)
    assert {p["case"] for p in pairs} <= {"001_saxpy", "005_bias_add_rows", "011_softmax_naive"}
    assert all(p["cuda"] and p["metal"] for p in pairs)
    assert "own pair excluded" in note
    naive = next(p for p in pairs if p["case"] == "011_softmax_naive")
    assert naive["metal_source"] == "011_softmax_naive/port.metal (corpus)"
    shuffle = next(c for c in naive["corresponds"] if "warp.shfl_xor" in c["rule_ids"])
    assert all("__shfl_xor_sync" in x["code"] for x in shuffle["cuda"])
    assert {"simd_max", "simd_sum"} <= {w for x in shuffle["metal"]
                                        for w in re.findall(r"\w+", x["code"])}


def test_without_a_kb_the_port_builds_it_on_first_use(tmp_path, monkeypatch):
    monkeypatch.setenv("KPORT_HOME", str(tmp_path / "empty"))
    pairs, note = analogues(ctx_for("012"), ctx_for("012").src)
    assert note.startswith(f"built the knowledge base on first use at {tmp_path / 'empty'}")
    assert pairs and "own pair excluded" in note
    assert analogues(ctx_for("012"), "softmax")[1].startswith("2 analogue pair(s)")  # once


def test_a_kb_that_cannot_be_built_leaves_the_port_going_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("KPORT_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv("KPORT_EMBED_MODEL", "no-such-embedding-model")
    pairs, note = analogues(ctx_for("001"), "saxpy")
    assert pairs == [] and note.startswith("no retrieval: cannot build the knowledge base")
    assert note.endswith("porting goes on without the knowledge base")
    assert not (tmp_path / "empty" / "kb").exists()
    assert analogues(ctx_for("001", use_kb=False), "saxpy")[1].startswith("knowledge base not")


def test_learn_adds_the_accepted_port_as_a_pair(kb_home, tmp_path):
    import json

    from agent.port_cli import main
    from kb.search import search
    from kb.store import KBStore

    folder = Path(discover(ids=["012"])[0].folder)
    with pytest.raises(SystemExit) as done:
        main([str(folder / "kernel.cu"), "--case", str(folder), "--out", str(tmp_path / "p"),
              "--offline", "--learn"])
    assert done.value.code == 0
    rep = json.loads((tmp_path / "p" / "report.json").read_text())
    assert any(n.startswith("--learn: added") for n in rep["notes"])
    assert "own pair excluded" in rep["kb"]
    # the rules at each line of the kernel, at the file's own lines
    at = {r["at"]: r for r in rep["rules_by_line"]}
    assert "__shfl_xor_sync" in at["kernel.cu:20"]["code"]
    assert "warp.shfl_xor" in {x["rule_id"] for x in at["kernel.cu:20"]["rules"]}
    assert {"kernel.cu:20", "kernel.cu:21"} <= set(next(
        r for r in rep["rules_matched"] if r["rule_id"] == "warp.shfl_xor")["where"])
    # the closest analogue, with the lines of its Metal port that do the same work
    naive = next(a for a in rep["analogues"] if a["case"] == "011_softmax_naive")
    row = next(c for c in naive["corresponds"] if "warp.shfl_xor" in c["rule_ids"])
    assert row["yours"] == ["kernel.cu:20", "kernel.cu:21"]
    assert any("simd_max" in x["code"] for x in row["metal"])
    md = (tmp_path / "p" / "report.md").read_text()
    assert "### Rules at each line of the kernel" in md and "| kernel.cu:20 |" in md
    assert "### Analogue" in md and "011_softmax_naive/port.metal:" in md
    hits = search(KBStore(kb_home / "kb"), "softmax_online", kinds=["analogues"], k=10,
                  cache_root=kb_home / "cache")
    learned = [h for h in hits if h.metadata.get("source") == "kport-port"]
    assert learned and learned[0].pair is not None
