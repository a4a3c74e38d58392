"""`kport mcp` through the official MCP SDK's own client over a real stdio session."""

import asyncio
import json
import os
from pathlib import Path

import pytest

from tests.cli import KPORT

mcp = pytest.importorskip("mcp", reason="the MCP tests need the `mcp` package (kport[mcp])")

ROOT = Path(__file__).parents[2]
SAXPY = ROOT / "corpus" / "cases" / "001_saxpy"


async def _session(calls):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=KPORT[0], args=[*KPORT[1:], "mcp"],
                                   env={**os.environ}, cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        return await calls(s)


def _payload(result) -> dict:
    if getattr(result, "structured_content", None):
        return result.structured_content
    return json.loads(result.content[0].text)


def run(calls):
    return asyncio.run(_session(calls))


def test_tools_and_resources_are_listed():
    async def calls(s):
        tools = {t.name for t in (await s.list_tools()).tools}
        resources = {str(r.uri) for r in (await s.list_resources()).resources}
        rules = await s.read_resource("kport://rules")
        return tools, resources, rules
    tools, resources, rules = run(calls)
    assert tools == {"kb_search", "kb_rules_for", "translate", "sim_run", "check_port", "port",
                     "benchmark"}
    assert resources == {"kport://rules", "kport://arch/chips", "kport://arch/families"}
    assert len(json.loads(rules.contents[0].text)) >= 150


def test_rules_translate_sim_and_check_through_the_protocol():
    src = (SAXPY / "kernel.cu").read_text()
    body = (SAXPY / "port.metal").read_text()

    async def calls(s):
        rules = _payload(await s.call_tool("kb_rules_for", {"source": src}))
        tr = _payload(await s.call_tool("translate", {"source": src, "kernel": "saxpy",
                                                      "grid": ["ceil_div(n, 256)"],
                                                      "block": [256]}))
        sim = _payload(await s.call_tool("sim_run", {
            "body": "uint i = thread_position_in_grid.x; y[i] = 2 * x[i];",
            "inputs": {"x": {"data": [1, 2, 3, 4], "dtype": "float32"}},
            "outputs": {"y": {"shape": [4], "dtype": "float32"}},
            "grid": [4, 1, 1], "threadgroup": [4, 1, 1]}))
        verdict = _payload(await s.call_tool("check_port", {"case": "001", "body": body}))
        bad = _payload(await s.call_tool("check_port", {"case": "001",
                                                        "body": "y_out[0] = 0;"}))
        return rules, tr, sim, verdict, bad
    rules, tr, sim, verdict, bad = run(calls)
    assert rules["ok"] and "launch.thread_idx" in {r["rule_id"] for r in rules["rules"]}
    assert tr["ok"] and tr["translation"]["outputs"] == ["y_out"]
    assert sim["ok"] and sim["outputs"]["y"] == [2.0, 4.0, 6.0, 8.0] and not sim["findings"]
    assert verdict["ok"] and verdict["verdict"]["accepted"] is True
    assert bad["ok"] and bad["verdict"]["accepted"] is False


def test_tool_errors_are_structured_not_tracebacks(tmp_path, monkeypatch):
    monkeypatch.setenv("KPORT_HOME", str(tmp_path / "empty-home"))
    monkeypatch.setenv("KPORT_EMBED_MODEL", "no-such-embedding-model")  # no KB can be built

    async def calls(s):
        no_kb = _payload(await s.call_tool("kb_search", {"query": "softmax"}))
        no_kernel = _payload(await s.call_tool("translate", {"source": "__global__ void a() {}",
                                                             "kernel": "b"}))
        bench = _payload(await s.call_tool("benchmark", {"case": "001", "body": "x"}))
        return no_kb, no_kernel, bench
    no_kb, no_kernel, bench = run(calls)
    assert not no_kb["ok"] and "kport kb build" in no_kb["error"]["message"]
    assert "cannot build the knowledge base" in no_kb["error"]["message"]
    assert not no_kernel["ok"] and "no kernel named 'b'" in no_kernel["error"]["message"]
    assert not bench["ok"] and "Apple Silicon" in bench["error"]["message"]
    for p in (no_kb, no_kernel, bench):
        assert "Traceback" not in json.dumps(p)


@pytest.mark.slow  # builds the whole knowledge base on first use (tests/tiers.py)
def test_kb_search_answers_like_the_cli(tmp_path, monkeypatch):
    """Over a real stdio session: the KB is built on first use, and each hit comes with its
    rank, calibrated score and answer; a CUDA query also says which of its lines each hit
    concerns."""
    monkeypatch.setenv("KPORT_HOME", str(tmp_path / "home"))
    kernel = (ROOT / "corpus" / "cases" / "012_softmax_online" / "kernel.cu").read_text()

    async def calls(s):
        question = _payload(await s.call_tool("kb_search", {
            "query": "how do I port __shfl_down_sync", "kinds": ["rules"], "k": 8}))
        code = _payload(await s.call_tool("kb_search", {"query": kernel, "k": 4,
                                                        "kinds": ["analogues"]}))
        return question, code
    question, code = run(calls)
    assert question["ok"] and question["note"].startswith("built the knowledge base")
    hits = question["hits"]
    assert [h["rank"] for h in hits] == list(range(1, 9))
    assert all(0.0 <= h["confidence"] <= 1.0 and h["lines"] is None for h in hits)
    shfl = next(h for h in hits if h["answer"]["rule_id"] == "warp.shfl_down")
    assert shfl["answer"]["metal"] == "simd_shuffle_down(v, delta)"
    assert any("simd_shuffle_down" in line for line in shfl["answer"]["example"]["metal"])
    assert shfl["answer"]["source"].startswith("cuda-to-metal.md")
    assert "Metal:   simd_shuffle_down(v, delta)" in question["text"]
    assert code["ok"] and "note" not in code  # built once
    assert all(h["lines"] for h in code["hits"])
    assert any("simd_max" in m["code"] for h in code["hits"] for c in h["corresponds"]
               for m in c["metal"])


def test_port_tool_runs_the_agent_offline():
    async def calls(s):
        return _payload(await s.call_tool("port", {"source": (SAXPY / "kernel.cu").read_text(),
                                                   "kernel": "saxpy", "case": "001"}))
    out = run(calls)
    assert out["ok"] and out["accepted"] is True
    assert "y_out" in out["kernel_metal"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_transport_serves_the_same_tools(tmp_path):
    """`kport mcp --http` in its own process, reached by the SDK's streamable HTTP client."""
    import socket
    import subprocess
    import time

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    port = _free_port()
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen([*KPORT, "mcp", "--http", "--port",
                               str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "KPORT_HOME": str(tmp_path / "home")})

    async def session():
        url = f"http://127.0.0.1:{port}/mcp"
        async with streamable_http_client(url) as (read, write), \
                ClientSession(read, write) as s:
            await s.initialize()
            tools = {t.name for t in (await s.list_tools()).tools}
            rules = _payload(await s.call_tool("kb_rules_for", {
                "source": (SAXPY / "kernel.cu").read_text()}))
            bad = _payload(await s.call_tool("check_port", {"case": "no-such-case",
                                                            "body": "x"}))
            return tools, rules, bad

    try:
        deadline = time.monotonic() + 60
        while True:  # until the server listens
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            assert time.monotonic() < deadline, "the HTTP server never listened"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.3)
        out = asyncio.run(session())
    finally:
        server.terminate()
        server.wait(timeout=30)
    tools, rules, bad = out
    assert {"kb_search", "translate", "port", "benchmark"} <= tools
    assert rules["ok"] and "launch.thread_idx" in {r["rule_id"] for r in rules["rules"]}
    assert not bad["ok"] and "no-such-case" in bad["error"]["message"]
