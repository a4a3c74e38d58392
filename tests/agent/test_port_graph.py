"""The porting graph: built and validated in one place; repair and optimisation paths with a
scripted fake chat model; budgets; checkpoints resumed by thread id."""

import pytest

from agent.graph import NODES, build_graph
from agent.session import new_thread_id, run_port
from runners.settings import load_settings
from tests.agent.agent_fakes import SAXPY_NO_COMPILE, SAXPY_OK, SAXPY_WRONG, launch, reply


def run(ctx, thread=None, **kw):
    return run_port(ctx, load_settings(), thread or new_thread_id("saxpy"), **kw)


def test_the_graph_is_built_and_validated_with_every_node():
    graph = build_graph().get_graph()
    assert set(NODES) <= set(graph.nodes)
    edges = {(e.source, e.target) for e in graph.edges}
    assert {("__start__", "analyze"), ("check", "benchmark"), ("decide", "draft"),
            ("decide", "optimise"), ("optimise", "check"), ("finish", "__end__")} <= edges


def test_offline_port_is_the_translators_draft_accepted(port_ctx):
    result = run(port_ctx(optimise=0))
    v = result.values
    assert result.finished and v["decision"] == "accept" and v["best"] is not None
    assert [a["origin"] for a in v["attempts"]] == ["translator"]
    assert "budget 0" in v["opt_note"] and v["llm_calls"] == 0


def test_repair_path_feeds_the_compile_error_back_and_accepts_the_fix(port_ctx, fake_llm):
    llm = fake_llm(SAXPY_NO_COMPILE, SAXPY_OK)
    v = run(port_ctx(llm, optimise=0)).values
    first, second = v["attempts"]
    assert (first["origin"], first["ok"]) == ("llm:draft", False)
    assert "not_declared" in first["feedback"][0]
    assert any(f["id"] == "mlx.undeclared_name" for f in v["fixes"])  # fix rules fed back
    assert (second["origin"], second["ok"]) == ("llm:repair", True)
    assert v["decision"] == "accept" and v["llm_calls"] == 2
    assert v["input_tokens"] == 1800 and v["output_tokens"] == 120


def test_optimise_scores_correct_candidates_and_rejects_wrong_ones(port_ctx, fake_llm):
    # The first port runs 8-thread groups (a quarter of a SIMD-group); the threadgroup-size
    # rewrite to 256 is predicted clearly faster by the cost model and becomes the best; the
    # next rewrite is wrong.
    llm = fake_llm(SAXPY_OK + launch(8), SAXPY_OK + launch(256), SAXPY_WRONG)
    v = run(port_ctx(llm, optimise=2)).values
    root, better, wrong = v["tree"]
    assert root["score"]["kind"] == "model" and root["predicted_s"] == root["score"]["value"]
    assert (better["action"], better["status"]) == ("threadgroup_size", "scored, new best")
    assert better["score"]["kind"] == "model"
    assert better["score"]["value"] < root["score"]["value"]
    assert wrong["status"] == "rejected" and "differ" in wrong["notes"][0]
    assert v["best"]["candidate"]["threadgroup"] == ["256", "1", "1"] or \
        v["best"]["candidate"]["threadgroup"] == [256, 1, 1]
    assert v["decision"] == "accept" and "optimisation budget spent" in v["opt_note"]


def test_token_budget_stops_before_the_next_request(port_ctx, fake_llm):
    llm = fake_llm(reply(SAXPY_NO_COMPILE, 58_000, 1_500), SAXPY_OK)
    v = run(port_ctx(llm, tokens=60_000)).values
    assert v["llm_calls"] == 1 and len(v["attempts"]) == 1
    assert v["decision"] == "reject" and "token budget" in v["stop_reason"]


def test_iteration_budget_counts_checked_candidates(port_ctx, fake_llm):
    llm = fake_llm(SAXPY_NO_COMPILE, SAXPY_WRONG, SAXPY_OK)
    v = run(port_ctx(llm, iterations=2)).values
    assert len(v["attempts"]) == 2 and "iteration budget" in v["stop_reason"]


def test_a_provider_error_stops_the_run_as_a_record(port_ctx):
    from agent.llm import LLM

    class Down:
        def invoke(self, messages):
            raise ConnectionError("server unreachable")

    v = run(port_ctx(LLM("fake:down", Down()))).values
    assert v["decision"] == "reject" and "ConnectionError" in v["stop_reason"]


def test_checkpoint_resumes_by_thread_id(port_ctx):
    thread = new_thread_id("saxpy")
    paused = run(port_ctx(optimise=0), thread, interrupt_after=["draft"])
    assert not paused.finished and not paused.values["attempts"]
    assert paused.values["candidate"]["origin"] == "translator"  # drafted, not yet checked
    resumed = run(port_ctx(optimise=0), thread)  # a new connection to the same SQLite file
    assert resumed.resumed and resumed.finished
    assert resumed.values["decision"] == "accept" and len(resumed.values["attempts"]) == 1
    again = run(port_ctx(optimise=0), thread)  # a finished thread gives its final state back
    assert again.values["attempts"] == resumed.values["attempts"]



def test_a_kill_between_a_steps_results_and_its_checkpoint_resumes(port_ctx):
    """The state a SIGKILL can leave: the draft step's results are saved, the checkpoint after
    it is not. Made here by deleting that checkpoint; the run must go on, not end empty."""
    import sqlite3

    from agent.session import CHECKPOINTS

    thread = new_thread_id("saxpy")
    run(port_ctx(optimise=0), thread, interrupt_after=["draft"])
    db = sqlite3.connect(load_settings().sessions_dir / CHECKPOINTS)
    with db:
        last = db.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY "
                          "checkpoint_id DESC LIMIT 1", (thread,)).fetchone()[0]
        db.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
                   (thread, last))
        db.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id = ?",
                   (thread, last))
    db.close()
    resumed = run(port_ctx(optimise=0), thread)
    assert resumed.resumed and resumed.finished
    assert resumed.values["decision"] == "accept" and len(resumed.values["attempts"]) == 1


def test_a_thread_cannot_be_reused_for_another_kernel(port_ctx):
    from corpus.cases import discover
    from runners.errors import KportError

    thread = new_thread_id("saxpy")
    run(port_ctx(), thread)
    with pytest.raises(KportError, match="another --thread"):
        run(port_ctx(case=discover(ids=["012"])[0]), thread)
