"""The same attacks through the other doors: the MCP `check_port` tool (the SDK's own client
over stdio), `kport eval` (malicious case folders: their Python reference, their CUDA oracle,
their case.toml; and every Metal attack as the port an LLM ships, through the eval worker),
and `kport check` on a case folder from elsewhere. Nothing may be accepted that should not be,
and nothing may leave a trace."""

import asyncio
import json
import os
import subprocess

import pytest

from tests.cli import KPORT
from tests.cli import kport as run_kport
from tests.sandbox.attack_corpus import ROOT, case_attacks, materialize, metal_attacks

METAL = metal_attacks()
pytestmark = pytest.mark.slow
CASES = case_attacks()


def kport(*args: str, env=None) -> subprocess.CompletedProcess:
    return run_kport(*args, env=env, timeout=1200)


def test_mcp_check_port_refuses_every_metal_attack(traces, tmp_path):
    mcp = pytest.importorskip("mcp", reason="the MCP test needs the `mcp` package (kport[mcp])")
    from mcp import ClientSession, StdioServerParameters, stdio_client

    attacks = [(a, materialize(a, traces, tmp_path / a.name)) for a in METAL]

    async def session():
        params = StdioServerParameters(command=KPORT[0], args=[*KPORT[1:], "mcp"],
                                       env={**os.environ}, cwd=str(ROOT))
        out = {}
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for attack, files in attacks:
                args = {"case": "001", "body": files[0].read_text()}
                if len(files) > 1:
                    args["header"] = files[1].read_text()
                result = await s.call_tool("check_port", args)
                payload = result.structured_content or json.loads(result.content[0].text)
                out[attack.name] = (payload, traces.found())
        return out

    assert mcp
    results = asyncio.run(session())
    assert len(results) == len(METAL)
    for name, (payload, found) in results.items():
        assert payload["ok"] and payload["verdict"]["accepted"] is False, (name, payload)
        assert found == [], (name, found)


def _filled_cases(traces, root):
    return {a.name: (a, materialize(a, traces, root)[0]) for a in CASES}


def test_kport_check_on_case_folders_from_elsewhere(traces, tmp_path):
    for name, (attack, folder) in _filled_cases(traces, tmp_path / "cases").items():
        proc = kport("check", str(folder), "--metal", str(folder / "port.metal"),
                     "--timeout", "60")
        if attack.expect.startswith("refused"):
            assert proc.returncode != 0, (name, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr, (name, proc.stderr)
        assert "root:" not in proc.stdout + proc.stderr
        assert traces.found() == [], name


def test_kport_eval_on_case_folders_from_elsewhere(traces, tmp_path):
    cases = _filled_cases(traces, tmp_path / "cases")
    for name, (attack, folder) in cases.items():  # refused before any of its code runs
        if attack.expect == "refused-at-load":
            proc = kport("eval", str(folder), "--out", str(tmp_path / f"run-{name}"))
            assert proc.returncode == 2 and "leads outside the case folder" in proc.stderr, (
                name, proc.stderr)
    runnable = {k: v for k, v in cases.items() if v[0].expect != "refused-at-load"}
    out = tmp_path / "run"
    proc = kport("eval", *[str(f) for _, f in runnable.values()], "--out", str(out),
                 "--workers", "2", "--timeout", "300")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "root:" not in proc.stdout + proc.stderr
    assert traces.found() == []
    done = {r["case"]: r for r in map(json.loads, (out / "results.jsonl").read_text()
                                      .splitlines())}
    assert set(done) == set(runnable), proc.stdout + proc.stderr
    for name, (attack, _) in runnable.items():
        if attack.expect == "refused":  # never a correct port of a case whose code attacked
            assert done[name]["correct"] is False, (name, done[name])
            assert any("the case is broken" in r for r in done[name]["reasons"]), done[name]


def test_links_in_a_case_folder_are_refused(traces, tmp_path):
    (attack, folder), = [v for k, v in _filled_cases(traces, tmp_path / "cases").items()
                         if k == "ref_writes_canary"]
    (folder / "helper.h").symlink_to(traces.secret)
    proc = kport("eval", str(folder), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and "a link in the case folder" in proc.stderr, proc.stderr
    assert traces.found() == []


# The llm-mode eval judges through the same harness as `kport check`, which every attack goes
# through above (and sim and MCP); here a sample of each kind keeps CI under its time budget:
# runaway runs, host writes and reads, signals, timing, state, the C++ MSL forbids, tricks on
# the preprocessor, the sanitizer and the compiler.
LLM_SAMPLE = {"infinite_loop", "out_of_bounds_host_write", "signal_sentinel", "timing_probe",
              "static_state", "fopen_read", "redefined_tsan_hooks",
              "digraph_include_constructor"}
assert LLM_SAMPLE <= {a.name for a in METAL}, LLM_SAMPLE - {a.name for a in METAL}


@pytest.mark.parametrize("attack", [a for a in METAL if a.name in LLM_SAMPLE],
                         ids=lambda a: a.name)
def test_eval_llm_mode_refuses_metal_attacks_an_llm_ships(attack, traces, tmp_path):
    """The eval worker in --mode llm, with a scripted model answering every turn with the
    attack (as a model told to cheat would)."""
    from itertools import repeat

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from agent.llm import use_chat_model
    from corpus.cases import discover
    from evals.eval_case import make_task, run_case

    files = materialize(attack, traces, tmp_path / "attack")
    answer = "```metal\n" + files[0].read_text() + "\n```"
    if len(files) > 1:
        answer = "```header\n" + files[1].read_text() + "\n```\n" + answer
    use_chat_model(GenericFakeChatModel(messages=repeat(AIMessage(answer))))
    try:
        rec = run_case(make_task(discover(ids=["001"])[0], mode="llm", timeout=300))
    finally:
        use_chat_model(None)
    assert rec["correct"] is False, rec
    assert traces.found() == []
