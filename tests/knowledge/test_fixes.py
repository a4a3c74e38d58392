"""Fix rules are checked knowledge: every pattern matches its own example, and every metal_sim
rule's trigger kernel really makes the simulator say something the pattern matches, with the rule
first among the fixes for that message."""

import textwrap

import numpy as np
import pytest

from kb.fixes import FixRuleError, load_fixes, match_fixes
from runners.dtypes import DTYPES, Tensor, to_mx
from runners.srcrewrite import SourceError

RULES = load_fixes()
SIM_RULES = [r for r in RULES if r.origin == "metal_sim"]


def _messages(t) -> list[str]:
    """What metal_sim reports for a trigger: compile errors, findings or the raised message."""
    import mlx.core as mx

    from runners.metal_sim import metal_kernel

    storage = np.dtype(DTYPES[t.in_dtype][0])
    x = to_mx(Tensor(np.arange(t.n).astype(storage), t.in_dtype))
    count = len(t.input_names) if t.inputs is None else t.inputs
    template = [(k, getattr(mx, v) if isinstance(v, str) else v) for k, v in t.template.items()]
    try:
        k = metal_kernel("trigger", t.input_names, t.output_names, t.body, t.header,
                         atomic_outputs=t.atomic_outputs)
        run = k.launch(inputs=[x] * count, output_shapes=[(t.n,)] * len(t.output_names),
                       output_dtypes=[getattr(mx, t.out_dtype)] * len(t.output_names),
                       grid=tuple(t.grid), threadgroup=tuple(t.threadgroup),
                       template=template or None, init_value=t.init_value)
    except (ValueError, SourceError) as err:
        return [str(err)]
    return ([str(d) for d in run.diagnostics if d.severity == "error"]
            + [str(f) for f in run.findings])


def test_rules_load_with_unique_ids_and_sources():
    assert len(RULES) >= 25 and len({r.id for r in RULES}) == len(RULES)
    assert all(r.sources and r.fix.strip() for r in RULES)
    assert [r.priority for r in RULES] == sorted((r.priority for r in RULES), reverse=True)


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_pattern_matches_its_own_example_and_the_rule_comes_first(rule):
    assert rule.matches(rule.example_error)
    assert match_fixes(rule.example_error)[0].id == rule.id


def test_rules_nobody_saw_are_unconfirmed():
    for r in RULES:
        if r.origin == "metal_compiler":
            assert r.unconfirmed, r.id  # Apple's wording was never seen here
        if r.origin == "metal_sim":
            assert r.trigger is not None, r.id


@pytest.mark.parametrize("rule", SIM_RULES, ids=[r.id for r in SIM_RULES])
def test_trigger_produces_the_diagnostic_the_rule_matches(rule, monkeypatch):
    if rule.trigger.timeout_s:
        monkeypatch.setenv("KPORT_SIM_TIMEOUT", str(rule.trigger.timeout_s))
    messages = _messages(rule.trigger)
    hits = [m for m in messages if rule.matches(m)]
    assert hits, f"{rule.id}: the simulator said {messages}"
    assert match_fixes(hits[0])[0].id == rule.id, [r.id for r in match_fixes(hits[0])]


def test_specific_rules_win_over_catch_alls():
    msg = "source.metal:1:10: error: use of undeclared identifier 'threadIdx'"
    ids = [r.id for r in match_fixes(msg)]
    assert ids[0] == "cuda.thread_index" and "mlx.undeclared_name" in ids
    assert ids.index("cuda.thread_index") < ids.index("mlx.undeclared_name")
    assert match_fixes("nothing to see here") == []


def _write(tmp_path, text):
    (tmp_path / "bad.toml").write_text(textwrap.dedent(text))
    return tmp_path


GOOD = """
    [[fix]]
    id = "x.rule"
    title = "t"
    pattern = 'boom'
    fix = "f"
    origin = "mlx"
    example_error = "it went boom"
    sources = ["F1"]
    """


@pytest.mark.parametrize("edit, key", [
    (("pattern = 'boom'", "pattern = 'bo(om'"), "pattern"),
    (("origin = \"mlx\"", "origin = \"gcc\""), "origin"),
    (("example_error = \"it went boom\"", "example_error = \"fine\""), "example_error"),
    (("sources = [\"F1\"]", "sources = []"), "sources"),
    (("origin = \"mlx\"", "origin = \"metal_sim\""), "trigger"),
    (("fix = \"f\"\n", "fix = \"f\"\n    colour = 1\n"), "colour"),
])
def test_loader_errors_name_file_rule_and_key(tmp_path, edit, key):
    folder = _write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(FixRuleError) as err:
        load_fixes(folder)
    text = str(err.value)
    assert "bad.toml" in text and "rule x.rule" in text and f"key `{key}`" in text, text


def test_loader_refuses_duplicate_ids(tmp_path):
    with pytest.raises(FixRuleError, match="also defined"):
        load_fixes(_write(tmp_path, GOOD + GOOD))
