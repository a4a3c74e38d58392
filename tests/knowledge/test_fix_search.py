"""Fix rules for a failure come from retrieval over the KB's fix rules as well as the pattern
table (issue 18): a wording no pattern foresaw still finds its rule; pattern matches stay first.
Real chromadb store, built once per session (tests/knowledge/conftest.py)."""

from types import SimpleNamespace

import pytest

from kb.fix_search import diagnostics_query, merged_fixes, retrieve_fixes
from kb.fixes import match_fixes

pytestmark = pytest.mark.slow  # reads the whole knowledge base, built once (tests/tiers.py)

GCC_WORDING = "program_source:12:9: error: 'threadIdx' was not declared in this scope"
PLAIN_WORDS = "kernel exceeded the 32 KB of threadgroup memory allowed"
SIM_RACE = ("source.metal:3: race: race on threadgroup variable 's' between thread (0, 0, 0) "
            "write and thread (1, 0, 0) read")


def test_retrieval_finds_the_rule_for_a_wording_no_pattern_knows(built_store, built_home):
    for message, rule in ((GCC_WORDING, "cuda.thread_index"),
                          (PLAIN_WORDS, "run.threadgroup_memory_limit")):
        assert match_fixes(message) == []  # the fixed table alone has nothing
        found = retrieve_fixes(built_store, [message], built_home / "cache")
        assert rule in [i for i, _ in found], found  # among the retrieved, whatever the order
        assert all(0.3 <= score <= 1.0 for _, score in found)


def test_pattern_matches_come_first_then_retrieved_ones(built_store, built_home):
    retrieved = retrieve_fixes(built_store, [SIM_RACE, GCC_WORDING], built_home / "cache")
    merged = merged_fixes([SIM_RACE, GCC_WORDING], retrieved)
    assert merged[0] == {**merged[0], "id": "run.threadgroup_race", "via": "pattern"}
    ids = [f["id"] for f in merged]
    assert len(ids) == len(set(ids)) and "cuda.thread_index" in ids
    later = merged[[f["via"] for f in merged].index("retrieval"):]
    assert all(f["via"] == "retrieval" and f["score"] >= 0.3 for f in later)


def test_the_query_drops_file_positions():
    assert diagnostics_query([GCC_WORDING]) == "error: 'threadIdx' was not declared in this scope"


def test_the_agent_merges_retrieved_fix_rules(built_home, monkeypatch):
    from agent.nodes.decide import fix_rules
    from agent.repairs import diagnosis_ids

    monkeypatch.setenv("KPORT_HOME", str(built_home))
    got = fix_rules(SimpleNamespace(use_kb=True), [GCC_WORDING], [])
    assert got and got[0]["id"] == "cuda.thread_index" and got[0]["via"] == "retrieval"
    assert fix_rules(SimpleNamespace(use_kb=False), [GCC_WORDING], []) == []
    ids = diagnosis_ids([SIM_RACE], [])  # what decide passes: pattern matches and lint ids
    both = fix_rules(SimpleNamespace(use_kb=True), [SIM_RACE], ids)
    assert both[0]["id"] == "run.threadgroup_race" and both[0]["via"] == "pattern"
    assert [f["via"] for f in both[1:]] and {f["via"] for f in both[1:]} == {"retrieval"}
