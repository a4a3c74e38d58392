"""The one typed candidate (corpus.candidate): its JSON round trip, its launch part, clear
errors for what lacks, and the candidate of a translation and of a case's own port."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from corpus.candidate import Candidate, Launch
from corpus.cases import discover

SAXPY = Path(__file__).resolve().parents[2] / "corpus" / "cases" / "001_saxpy"
GOLDEN = {"inputs": ["x", "n"], "outputs": ["y"], "grid": ["ceil_div(n, 256) * 256", 1, 1],
          "threadgroup": [256, 1, 1], "template": {"B": 256, "T": "float32", "F": True},
          "atomic_outputs": True, "init_value": 0.0, "names": {"x": "x_kp"},
          "body": "y[0] = x[0];\n",
          "header": "inline float sq(float v) { return v * v; }", "origin": "llm:draft",
          "error": None}


def test_a_candidate_round_trips_through_json_unchanged():
    cand = Candidate.model_validate(GOLDEN)
    assert cand.model_dump() == GOLDEN  # what the agent's state and report.json hold
    assert Candidate.model_validate(json.loads(json.dumps(cand.model_dump()))) == cand
    # sizes stay as written: expressions stay strings, ints stay ints, "256" is not 256
    assert Candidate.model_validate({**GOLDEN, "grid": ["256"]}).grid == ["256"]


def test_defaults_and_frozen():
    cand = Candidate(body="y[0] = 1;", inputs=[], outputs=["y"], grid=[1], threadgroup=[1])
    assert (cand.header, cand.template, cand.atomic_outputs, cand.init_value, cand.origin,
            cand.error) == ("", {}, False, None, "", None)
    with pytest.raises(ValidationError):
        cand.body = "changed"  # a new candidate is a copy: model_copy(update=...)


def test_the_launch_part_is_the_metal_kernel_call_without_its_source():
    launch = Candidate.model_validate(GOLDEN).launch()
    assert type(launch) is Launch
    assert launch.model_dump() == {k: GOLDEN[k] for k in (
        "inputs", "outputs", "grid", "threadgroup", "template", "atomic_outputs", "init_value",
        "names")}
    assert json.loads(json.dumps(launch.model_dump())) == launch.model_dump()  # JSON-ready
    back = launch.with_source("y[0] = 2;", origin="edit")
    assert back.launch() == launch and (back.body, back.header, back.origin) == (
        "y[0] = 2;", "", "edit")


def test_launch_of_takes_a_candidate_or_a_dict_and_says_what_lacks():
    cand = Candidate.model_validate(GOLDEN)
    assert Launch.of(cand) == Launch.of(GOLDEN) == cand.launch()  # other keys are ignored
    # None means the default, as a dict built with .get() gives it
    assert Launch.of({**GOLDEN, "template": None, "atomic_outputs": None}).template == {}
    with pytest.raises(ValueError, match=r"^launch override lacks grid, threadgroup$"):
        Launch.of({"inputs": ["x"], "outputs": ["y"], "grid": []})
    with pytest.raises(ValueError, match=r"launch override: template: .*dictionary"):
        Launch.of({**GOLDEN, "template": 3})


def test_a_missing_field_is_named():
    data = {k: v for k, v in GOLDEN.items() if k not in ("body", "grid")}
    with pytest.raises(ValidationError) as err:
        Candidate.model_validate(data)
    text = str(err.value)
    assert "2 validation errors for Candidate" in text
    assert "\ngrid\n  Field required" in text and "\nbody\n  Field required" in text
    with pytest.raises(ValidationError, match=r"threadgroup\n.*list"):
        Candidate.model_validate({**GOLDEN, "threadgroup": "256"})
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Candidate.model_validate({**GOLDEN, "thredgroup": [256]})  # a misspelt key


def test_a_candidate_from_a_translation_and_its_json():
    from agent.translate import translate_kernel
    from agent.translate_cli import translation_json

    src = (SAXPY / "kernel.cu").read_text()
    tr = translate_kernel(src, "saxpy", roles={"x": "in", "y": "inout", "a": "scalar",
                                               "n": "scalar"},
                          grid=["ceil_div(n, 256)", 1, 1], block=[256, 1, 1])
    cand = Candidate.from_translation(tr)
    assert cand.origin == "translator" and cand.error is None
    assert (cand.body, cand.header) == (tr.body, tr.header)
    assert cand.inputs == ["x", "y", "a", "n"] and cand.outputs == ["y_out"]
    assert cand.grid == ["(ceil_div(n, 256)) * (256)", "(1) * (1)", "(1) * (1)"]
    assert cand.threadgroup == ["256", "1", "1"]
    trj = translation_json(tr)  # the translator's output carries the candidate's fields
    assert {k: trj[k] for k in cand.launch().model_dump()} == cand.launch().model_dump()
    assert "origin" not in trj and trj["kernel"] == "saxpy" and "coverage" in trj
    assert Candidate.from_translation(trj, "llm") == cand.model_copy(update={"origin": "llm"})


def test_a_translation_without_a_launch_is_a_candidate_that_cannot_run():
    from agent.translate import translate_kernel

    tr = translate_kernel("__global__ void k(float* y) { y[threadIdx.x] = 0.0f; }\n", "k")
    cand = Candidate.from_translation(tr)
    assert cand.grid == [] and cand.threadgroup == []
    with pytest.raises(ValueError, match="launch override lacks inputs, grid, threadgroup"):
        Launch.of(cand)


def test_a_cases_own_port_as_a_candidate():
    case = discover(ids=["001"])[0]
    expert = Candidate.from_case(case)
    assert expert.origin == "expert" and expert.body == (SAXPY / "port.metal").read_text()
    assert expert.launch() == Launch.from_metal(case.metal)
    assert expert.launch().model_dump() == {
        "inputs": ["x", "y", "a", "n"], "outputs": ["y_out"],
        "grid": ["ceil_div(n, 256) * 256", 1, 1], "threadgroup": [256, 1, 1],
        "template": {}, "atomic_outputs": False, "init_value": None, "names": {}}


def test_the_harness_refuses_a_launch_that_lacks_a_key():
    from agent.harness import judge

    case = discover(ids=["001"])[0]
    with pytest.raises(ValueError, match=r"^launch override lacks outputs, threadgroup$"):
        judge(case, "y_out[0] = 0;", launch={"inputs": ["x"], "grid": [1]})


def test_a_port_with_no_outputs_is_one_clear_line(tmp_path):
    """A translation that found no buffer the kernel writes (llama.cpp's ssm_conv writes dst
    through a byte-offset cast) gets a reason a person can act on, not pydantic's report."""
    from corpus.port_check import case_with_port

    case = discover(ids=["001"])[0]
    port = Candidate.from_case(case).model_copy(update={"outputs": []})
    with pytest.raises(ValueError) as err:
        case_with_port(case, tmp_path / "case", port)
    text = str(err.value)
    assert text.startswith("the port's launch cannot be checked: outputs: none")
    assert "\n" not in text and "pydantic" not in text and 'role = "out"' in text
