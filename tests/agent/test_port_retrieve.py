"""Retrieval for a port from a tiny KB: analogues never include the case's own expert pair
(leave-one-out); a missing KB is reported, not fatal; --learn adds an accepted port."""

import time
from pathlib import Path

import pytest

from agent.nodes.retrieve import analogues
from agent.state import PortContext
from corpus.cases import discover

CASES = ("001", "005", "012")


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
    assert {p["case"] for p in pairs} <= {"001_saxpy", "005_bias_add_rows"}
    assert all(p["cuda"] and p["metal"] for p in pairs)
    assert "own pair excluded" in note


def test_without_a_kb_the_port_goes_on_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("KPORT_HOME", str(tmp_path / "empty"))
    pairs, note = analogues(ctx_for("001"), "saxpy")
    assert pairs == [] and note.startswith("no retrieval: no knowledge base")
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
    hits = search(KBStore(kb_home / "kb"), "softmax_online", kinds=["analogues"], k=10,
                  cache_root=kb_home / "cache")
    learned = [h for h in hits if h.metadata.get("source") == "kport-port"]
    assert learned and learned[0].pair is not None
