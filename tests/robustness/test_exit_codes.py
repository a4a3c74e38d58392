"""The dispatcher's exit codes (docs/inputs.md): 0 ok, 1 failed, 2 input error in one line,
3 a kport bug in one line with its traceback saved, 130 interrupted — whatever the verb."""

from __future__ import annotations

import sys
import types

import pytest
import typer

from agent import cli


def _verb(body) -> types.ModuleType:
    """A verb module whose command runs ``body(value)``."""
    module = types.ModuleType("kport_test_verb")
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.command()
    def run(value: int = typer.Option(1, min=0, help="a number")):
        return body(value)

    module.app = app
    sys.modules[module.__name__] = module
    return module


@pytest.fixture
def verb(monkeypatch):
    def install(body):
        _verb(body)
        monkeypatch.setattr(cli, "verbs", lambda: {"probe": ("kport_test_verb", "a test verb")})
    yield install
    sys.modules.pop("kport_test_verb", None)


def test_a_bug_is_one_line_and_its_traceback_is_kept(verb, capsys, fresh_home):
    def crash(value):
        return {}["no such key"]
    verb(crash)
    assert cli.main(["probe"]) == cli.EXIT_BUG
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "internal error" in err and "KeyError" in err
    saved = list((fresh_home / "logs").glob("crash-probe-*.txt"))
    assert len(saved) == 1 and str(saved[0]) in err
    assert "Traceback" in saved[0].read_text() and "crash" in saved[0].read_text()


def test_an_input_error_is_exit_2_in_one_line(verb, capsys):
    from runners.errors import KportError

    def refuse(value):
        raise KportError(f"--value {value}: too small; give 5 or more")
    verb(refuse)
    assert cli.main(["probe", "--value", "3"]) == cli.EXIT_INPUT
    assert capsys.readouterr().err == "kport probe: error: --value 3: too small; give 5 or more\n"


@pytest.mark.parametrize("argv, fragment", [
    (["probe", "--value", "x"], "--value"),
    (["probe", "--value", "-1"], "--value"),
    (["probe", "--nosuch"], "--nosuch"),
    (["probe", "extra"], "extra"),
])
def test_a_usage_error_is_exit_2_in_one_line(verb, capsys, argv, fragment):
    verb(lambda value: 0)
    assert cli.main(argv) == cli.EXIT_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err and "kport probe --help" in err


def test_results_and_interrupts_keep_their_codes(verb, capsys):
    verb(lambda value: value)
    assert cli.main(["probe", "--value", "0"]) == cli.EXIT_OK
    assert cli.main(["probe", "--value", "1"]) == cli.EXIT_FAILED

    def interrupted(value):
        raise KeyboardInterrupt
    verb(interrupted)
    assert cli.main(["probe"]) == cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip().endswith("interrupted")
