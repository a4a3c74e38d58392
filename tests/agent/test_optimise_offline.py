"""The optimise step with no LLM: mechanical rewrites of the accepted port in a best-first tree,
each checked by the harness and scored by the cost model (real metal_sim runs); the best
predicted correct candidate ships, and the report draws the tree."""

from agent.nodes.check import held_out_check, run_check
from agent.nodes.optimise import MODEL_MARGIN, clearly_better
from agent.report import shipped_node, tree_markdown
from agent.session import new_thread_id, run_port
from corpus.candidate import Candidate
from corpus.cases import discover
from runners.settings import load_settings


def test_offline_search_ships_the_best_predicted_correct_rewrite(port_ctx):
    # case 006: the shuffle trees become simd_sum and the barriers narrow (both correct); a
    # BLOCK sweep changes which elements each partial sum holds, so the harness rejects it
    case = discover(ids=["006"])[0]
    v = run_port(port_ctx(case=case, optimise=3), load_settings(),
                 new_thread_id("sum")).values
    tree = v["tree"]
    assert v["decision"] == "accept" and len(tree) == 4 and v["llm_calls"] == 0
    assert [n["action"] for n in tree] == [None, "simd_collectives", "narrow_barriers",
                                           "template:BLOCK=512"]
    assert tree[1]["parent"] == 0 and tree[2]["parent"] == 1  # expanded the best node
    assert tree[3]["status"] == "rejected" and "differ" in tree[3]["notes"][0]
    scored = [n for n in tree if n["status"] != "rejected"]
    assert all(n["score"]["kind"] == "model" and n["predicted_s"] > 0 for n in scored)
    best = tree[0]  # a node replaces the best only when predicted MODEL_MARGIN faster
    for n in scored[1:]:
        if n["predicted_s"] < best["predicted_s"] * (1 - MODEL_MARGIN):
            best = n
    assert v["best"]["score"]["value"] == best["predicted_s"]
    assert shipped_node(v) == best["id"]
    assert "optimisation budget spent (3 candidates)" in v["opt_note"]

    md = "\n".join(tree_markdown({"note": v["opt_note"], "tree": tree,
                                  "shipped_node": shipped_node(v), "scores": "model note"}))
    assert "- node 0 root" in md and "\n  - node 1 simd_collectives" in md
    assert "\n    - node 2 narrow_barriers" in md and "rejected; partials:" in md
    assert md.count("<- shipped") == 1 and "µs, dram-bound" in md


def test_offline_search_stops_when_no_rewrite_applies(port_ctx, saxpy):
    # saxpy's 256-thread groups sweep to the other four sizes; from any of them the sweep
    # gives only launches already in the tree, so the search ends before its budget
    v = run_port(port_ctx(optimise=20), load_settings(), new_thread_id("saxpy")).values
    actions = [n["action"] for n in v["tree"][1:]]
    assert sorted(actions) == sorted(f"threadgroup:{s}" for s in (64, 128, 512, 1024))
    assert "every applicable action was tried" in v["opt_note"]
    assert len({n["fingerprint"] for n in v["tree"]}) == len(v["tree"])  # no repeats


def test_a_model_gain_within_its_error_does_not_ship_a_rewrite():

    root = {"kind": "model", "value": 100e-6}
    assert not clearly_better({"kind": "model", "value": 100e-6 * (1 - MODEL_MARGIN / 2)}, root)
    assert clearly_better({"kind": "model", "value": 100e-6 * (1 - 2 * MODEL_MARGIN)}, root)
    assert not clearly_better({"kind": "lints", "value": 0}, root)  # kinds never compare
    assert clearly_better({"kind": "lints", "value": 1}, {"kind": "lints", "value": 2})


def test_a_rewrite_wrong_only_beyond_the_listed_sizes_is_rejected():
    # softmax at n 1024, 997, 61 (its listed sizes): a body that stops writing at column 2048
    # passes them all, and fails at the stretched n = 2049 the optimiser's check adds
    case = discover(ids=["011"])[0]
    right = Candidate.from_case(case)
    loop = "for (uint c = tid; c < cols; c += BLOCK) dst[c]"
    assert loop in right.body
    wrong = right.model_copy(update={"body": right.body.replace(
        loop, loop.replace("c < cols", "c < min(cols, 2048u)"))})
    listed = run_check(case, wrong, 1)
    assert listed["ok"] and all(max(r["sizes"]["n"] for r in listed["runs"]) < 2048
                                for r in listed["runs"])
    checked = held_out_check(case, wrong, listed)
    assert not checked["ok"]
    assert checked["feedback"][0].startswith("at held-out sizes {'rows': 17, 'n': 2049}")
    fine = held_out_check(case, right, run_check(case, right, 1))
    held = [r for r in fine["runs"] if r.get("held_out")]
    assert fine["ok"] and len(held) == 2 and held[0]["sizes"] == {"rows": 17, "n": 2049}
    assert held[1]["sizes"] not in case.size_sets() and held[1]["metal"] == "ok"
