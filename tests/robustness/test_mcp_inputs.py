"""Bad arguments to the MCP tools come back as structured errors naming the argument, before
anything is allocated or launched (the server's tools as the SDK calls them)."""

import pytest

from agent.mcp_server import _structured, sim_run

BODY = "uint i = thread_position_in_grid.x; y[i] = x[i] * 2;"
X = {"x": {"data": [1, 2, 3, 4]}}


@pytest.mark.parametrize("outputs, grid, tg, fragment", [
    ({"y": {"shape": [4], "dtype": "nope"}}, [4, 1, 1], [4, 1, 1], "unknown dtype"),
    ({"y": {"shape": [4]}}, [4, 1, 1], [2048, 1, 1], "2048 threads"),
    ({"y": {"shape": [4]}}, [2**33, 1, 1], [4, 1, 1], "grid side"),
    ({"y": {"shape": [10**12]}}, [4, 1, 1], [4, 1, 1], "TiB"),
    ({"y": {"shape": [-1]}}, [4, 1, 1], [4, 1, 1], "outputs.y.shape"),
    ({"y": {"shape": []}}, [4, 1, 1], [0, 1, 1], "positive"),
])
def test_sim_run_refuses_bad_arguments(outputs, grid, tg, fragment):
    got = _structured(sim_run)(BODY, X, outputs, grid, tg)
    assert got["ok"] is False and fragment in got["error"]["message"], got


def test_sim_run_still_runs_a_good_call():
    got = _structured(sim_run)(BODY, X, {"y": {"shape": [4]}}, [4, 1, 1], [4, 1, 1])
    assert got["ok"] and got["outputs"]["y"] == [2.0, 4.0, 6.0, 8.0], got


def test_kb_search_refuses_an_empty_query_before_building_the_kb(tmp_path, monkeypatch):
    from agent.mcp_server import kb_search

    monkeypatch.setenv("KPORT_HOME", str(tmp_path / "home"))
    got = _structured(kb_search)(" \n")
    assert got["ok"] is False and "the query is empty" in got["error"]["message"], got
    assert not (tmp_path / "home" / "kb").exists()  # nothing was built for it
