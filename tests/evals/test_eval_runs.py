"""`kport eval`: a real offline batch run over four cheap corpus cases (two workers), its
JSON lines and run.json; a SIGKILL mid-run then --resume (nothing finished lost or redone);
the Ray executor against a real local Ray instance; per-case budgets; usage errors."""

import json
import os
import signal
import subprocess
import time

import pytest

from corpus.cases import discover
from evals.eval_case import RESULT_FIELDS, make_task, run_case
from evals.results import RESULTS, RunDirError, read_results
from tests.cli import KPORT
from tests.evals.eval_fixtures import CHEAP, ROOT, kport

pytestmark = pytest.mark.slow  # eval runs end to end, a killed run, Ray (tests/tiers.py)


def lines(folder) -> list[dict]:
    return [json.loads(x) for x in (folder / RESULTS).read_text().splitlines()]


def test_offline_eval_writes_one_line_per_case_with_every_field(offline_run):
    out, proc = offline_run
    recs = lines(out)
    assert sorted(r["case"] for r in recs) == CHEAP
    for r in recs:
        assert list(r) == list(RESULT_FIELDS)
        assert r["mode"] == "offline" and r["iterations"] == 1 and r["llm_tokens"] == 0
        assert r["compiled"] is True and r["correct"] is True, r["reasons"]
        assert r["runs"] >= 9 and r["todos"] == 0 and r["coverage"] == 1.0
        assert r["speedup"] is None and r["wall_s"] > 0  # no Apple GPU here
    assert {r["category"] for r in recs} == {"elementwise", "reduction"}
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["workers"] == 2 and run["settings"]["seeds"] == 3
    assert run["versions"]["python"] and run["started"] and run["finished"]
    m = run["metrics"]
    assert (m["cases"], m["compiled_pct"], m["correct_pct"], m["fast_p"]) == (4, 100, 100, None)
    assert "null off Apple Silicon" in m["fast_p_note"]
    assert "correct 100% (4)" in proc.stdout and "fast_1 null" in proc.stdout
    assert "cases" in proc.stderr  # the progress bar and per-case lines go to stderr


def test_a_kill_mid_run_loses_nothing_and_resume_redoes_nothing(tmp_path):
    out = tmp_path / "killed"
    cmd = [*KPORT, "eval", *CHEAP, "--workers", "1", "--out",
           str(out)]
    tmp = tmp_path / "tmp"  # the killed workers' temporary folders stay in the test's
    tmp.mkdir()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "TMPDIR": str(tmp)})
    results = out / RESULTS
    deadline = time.monotonic() + 240
    try:
        while not (results.is_file() and results.read_bytes().count(b"\n") >= 1):
            assert proc.poll() is None and time.monotonic() < deadline, "no line appeared"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers, mid-run
        proc.wait()
    before = results.read_text()
    done = [json.loads(x)["case"] for x in before.splitlines()]
    assert 1 <= len(done) < len(CHEAP)
    # what a kill in the middle of a write leaves: half a line, no newline
    with open(results, "a") as f:
        f.write('{"case": "00')
    assert read_results(out)[1] == len(done) + 1

    again = kport("eval", *CHEAP, "--workers", "2", "--out", str(out), "--resume")
    assert again.returncode == 0, again.stdout + again.stderr
    after = results.read_text()
    assert after.startswith(before)  # finished lines kept byte for byte
    ids = [json.loads(x)["case"] for x in after.splitlines()]
    assert sorted(ids) == CHEAP and len(ids) == len(set(ids))  # nothing lost, nothing twice
    assert f"{len(done)} finished before" in again.stdout
    assert len(json.loads((out / "run.json").read_text())["resumed"]) == 1


def test_the_ray_executor_gives_the_local_verdicts(offline_run):
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'kport[ray]'")
    from evals.executors import RayExecutor

    local = {r["case"]: r for r in lines(offline_run[0])}
    tasks = [make_task(c, seeds=3, timeout=300) for c in discover(ids=["001", "006"])]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ex = RayExecutor(2)
        assert not ex.started  # it uses the instance this process started
        got = {t.case_id: (rec, err) for t, rec, err in ex.map_unordered(run_case, tasks)}
        ex.close()
    finally:
        ray.shutdown()
    assert set(got) == {"001_saxpy", "006_sum_partials"}
    for case, (rec, err) in got.items():
        assert err is None
        keys = ("compiled", "correct", "reasons", "runs", "todos", "coverage", "speedup")
        assert {k: rec[k] for k in keys} == {k: local[case][k] for k in keys}


def test_a_spent_case_budget_is_a_record_not_an_error():
    task = make_task(discover(ids=["001"])[0], timeout=0.3)
    rec = run_case(task)
    assert rec["correct"] is False and "case budget of 0.3 s spent" in rec["reasons"][-1]
    assert rec["wall_s"] < 30


def test_llm_mode_runs_the_agent_and_judges_the_port_it_ships():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from agent.llm import use_chat_model

    body = ("```metal\nuint i = thread_position_in_grid.x;\n"
            "if (i < uint(n)) y_out[i] = a * x[i] + y[i];\n```")
    usage = {"input_tokens": 900, "output_tokens": 60, "total_tokens": 960}
    use_chat_model(GenericFakeChatModel(messages=iter([AIMessage(body, usage_metadata=usage)])))
    try:
        rec = run_case(make_task(discover(ids=["001"])[0], mode="llm", timeout=300))
    finally:
        use_chat_model(None)
    assert rec["mode"] == "llm" and rec["correct"] is True, rec["reasons"]
    assert rec["iterations"] == 1 and rec["llm_tokens"] == 960 and rec["runs"] >= 9


def test_llm_mode_without_a_model_says_what_to_set(tmp_path):
    proc = kport("eval", "001", "--mode", "llm", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "needs KPORT_MODEL" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()  # refused before any work


def test_a_used_run_folder_needs_resume_and_the_same_settings(offline_run, tmp_path):
    from evals.eval_cli import main
    from runners.errors import KportError

    out = str(offline_run[0])
    for argv, says in [(["001", "--out", out], "pass --resume"),
                       (["001", "--out", out, "--resume", "--seeds", "4"], "used --seeds 3"),
                       (["001", "--resume"], "--resume needs --out"),
                       ([str(tmp_path / "nowhere" / "x")], "no such folder")]:
        with pytest.raises(KportError, match=says):
            main(argv)


def test_a_damaged_results_line_is_named_with_its_number(tmp_path):
    good = json.dumps({k: None for k in RESULT_FIELDS})
    (tmp_path / RESULTS).write_text(good + "\n{oops\n" + good + "\n")
    with pytest.raises(RunDirError, match=r"results.jsonl line 2: not JSON"):
        read_results(tmp_path)
    (tmp_path / RESULTS).write_text(good + '\n{"case": "x"}\n')
    with pytest.raises(RunDirError, match=r"line 2: no key 'category'"):
        read_results(tmp_path)
