"""The `kport` dispatcher and `kport doctor`, run as a user runs them (a real subprocess)."""

import json

from tests.cli import kport


def test_help_lists_every_verb():
    from agent.cli import verbs

    proc = kport("--help")
    assert proc.returncode == 0
    for verb in verbs():
        assert verb in proc.stdout


def test_unknown_verb_is_a_usage_error():
    proc = kport("frobnicate")
    assert proc.returncode == 2
    assert "unknown verb 'frobnicate'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_doctor_json_tells_the_truth_here(fresh_home):
    proc = kport("doctor", "--json")
    report = json.loads(proc.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert str(fresh_home) == checks["KPORT_HOME"]["detail"]
    assert fresh_home.is_dir()
    import mlx.core as mx

    metal = "Metal GPU available" in checks["mlx / Metal GPU"]["detail"]
    assert metal == mx.metal.is_available()
    assert "not built" in checks["knowledge base"]["detail"]
    # This machine has a compiler (ziglang is a dependency), so the offline pipeline can run.
    assert checks["simulator compiler"]["ok"], checks["simulator compiler"]
    assert report["ok"] is True and proc.returncode == 0


def test_doctor_exits_1_with_a_hint_when_the_compiler_is_wrong(fresh_home):
    proc = kport("doctor", env={"KPORT_CXX": "/bin/false"})
    assert proc.returncode == 1
    assert "hint simulator compiler" in proc.stdout
    assert "KPORT_CXX" in proc.stdout


def test_doctor_never_prints_a_key(fresh_home):
    secret = "sk-test-should-never-appear-123"
    proc = kport("doctor", "--json",
                 env={"KPORT_MODEL": "openai:gpt-test", "OPENAI_API_KEY": secret})
    assert secret not in proc.stdout + proc.stderr
    llm = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "LLM provider")
    assert "OPENAI_API_KEY: set" in llm["detail"]


def test_bad_config_file_is_a_clear_error_not_a_traceback(fresh_home):
    fresh_home.mkdir(parents=True)
    (fresh_home / "config.toml").write_text("colour = 'blue'\n")
    proc = kport("doctor")
    assert proc.returncode == 2
    assert "config.toml: unknown key 'colour'" in proc.stderr
    assert "Traceback" not in proc.stderr
