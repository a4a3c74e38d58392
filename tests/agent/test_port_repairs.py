"""Reading LLM replies, offline mechanical repairs keyed by fix rules and lints, and the
offline agent stopping honestly when nothing mechanical applies."""

from agent.prompts import parse_reply
from agent.repairs import diagnosis_ids, mechanical_repair
from corpus.candidate import Candidate

BASE = Candidate(body="old;\n", header="", inputs=["x"], outputs=["y"], grid=["n"],
                 threadgroup=[256], template={}, atomic_outputs=False, init_value=None)


def test_a_reply_gives_body_header_and_launch():
    text = ("Here:\n```header\ninline float sq(float v) { return v * v; }\n```\n"
            "```metal\ny[0] = sq(x[0]);\n```\n```json\n{\"threadgroup\": [128, 1, 1], "
            "\"template\": {\"B\": 128}, \"inputs\": [\"evil\"]}\n```")
    c = parse_reply(text, BASE, "llm:draft")
    assert c.body == "y[0] = sq(x[0]);\n" and "inline float sq" in c.header
    assert c.threadgroup == [128, 1, 1] and c.template == {"B": 128}
    assert c.inputs == ["x"] and c.origin == "llm:draft"  # names are not the model's


def test_a_reply_without_a_body_is_a_failed_record():
    c = parse_reply("I cannot do that.", BASE, "llm:draft")
    assert "no ```metal block" in c.error and c.body == "old;\n"


def test_repairs_edit_tokens_not_comments_or_longer_names():
    cand = BASE.model_copy(update={"body": "// double check\ndouble v = 1.0; my_double_t w;\n"
                                   "atomic_fetch_add_explicit(p, 1, memory_order_seq_cst);\n"})
    fixed, rid = mechanical_repair(cand, None, ["types.fp64"], set())
    assert rid == "types.fp64" and fixed.origin == "repair:types.fp64"
    assert "// double check\nfloat v = 1.0; my_double_t w;" in fixed.body
    relaxed, _ = mechanical_repair(cand, None, ["compiler.memory_order"], set())
    assert "memory_order_relaxed" in relaxed.body
    assert mechanical_repair(cand, None, ["types.fp64"], {"types.fp64"}) is None  # tried
    assert mechanical_repair(cand, None, ["run.threadgroup_race"], set()) is None  # no repair


def test_diagnoses_come_from_fix_rules_lints_and_the_comparison():
    ids = diagnosis_ids(["source.metal:3:5: error: use of undeclared identifier 'threadIdx'",
                         "y: NaN in the result (an unwritten output?)"],
                        [{"id": "types.fp64", "severity": "error"}])
    assert ids[0] == "cuda.thread_index" and "types.fp64" in ids
    assert ids[-1] == "check.unwritten_output"


def test_offline_agent_stops_and_says_why_when_no_repair_applies(port_ctx, tmp_path):
    import shutil

    from agent.session import new_thread_id, run_port
    from corpus.cases import discover, load_case
    from runners.settings import load_settings

    # corpus 039 (41 KB of threadgroup memory) with K still read where V is: no tile's storage
    # is free for V (agent/restage.py refuses), and no tiling parameter fits it (retile)
    original = discover(ids=["039"])[0].folder
    folder = shutil.copytree(original, tmp_path / original.name)
    src = (folder / "kernel.cu").read_text()
    read = "const float p = Ps[warp * kRows + r][j];"
    assert read in src
    (folder / "kernel.cu").write_text(src.replace(
        read, "const float p = Ps[warp * kRows + r][j] + 0.0f * Ks[j][0];"))
    case = load_case(folder)
    v = run_port(port_ctx(case=case), load_settings(), new_thread_id(case.cuda.kernel)).values
    assert v["decision"] == "reject" and len(v["attempts"]) == 1
    assert v["stop_reason"].startswith("offline: no mechanical repair for:")
    assert "threadgroup memory" in v["stop_reason"]
    assert any(f["id"] == "run.threadgroup_memory_limit" for f in v["fixes"])


def test_a_repair_with_a_detail_is_known_as_tried():
    """An attempt's origin ``repair:<id> (what it did)`` names the repair by its id, so the
    offline agent never tries the same repair twice."""
    from agent.repairs import repair_id

    assert repair_id("repair:run.threadgroup_memory_limit (NITEMS 4 -> 2)") == (
        "run.threadgroup_memory_limit")
    assert repair_id("repair:tgmem.over_limit") == "tgmem.over_limit"
    assert repair_id("translate") is None
