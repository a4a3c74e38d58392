"""Settings: precedence, the state home, and clear errors for bad configuration."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from runners.settings import ConfigError, default_home, load_settings


def test_home_from_env_and_paths_under_it(tmp_path):
    s = load_settings(env={"KPORT_HOME": str(tmp_path)})
    assert s.home == tmp_path
    for path in (s.kb_dir, s.build_cache_dir, s.sessions_dir, s.runs_dir):
        assert tmp_path in path.parents


def test_the_build_cache_may_live_outside_the_home(tmp_path):
    env = {"KPORT_HOME": str(tmp_path / "home"), "KPORT_BUILD_CACHE": str(tmp_path / "shared")}
    assert load_settings(env=env).build_cache_dir == tmp_path / "shared"
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text(f'build_cache = "{tmp_path / "file"}"\n')
    assert load_settings(env={"KPORT_HOME": str(tmp_path / "home")}).build_cache_dir == \
        tmp_path / "file"


def test_default_home_is_per_user(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    s = load_settings(env={})
    assert s.home == default_home()
    assert str(s.home).startswith(str(Path.home())) or str(s.home).startswith(str(tmp_path))


def test_precedence_override_env_file(tmp_path):
    (tmp_path / "config.toml").write_text('model = "ollama:from-file"\nsim_timeout = 5\n')
    env = {"KPORT_HOME": str(tmp_path)}
    assert load_settings(env=env).model == "ollama:from-file"
    assert load_settings(env=env).sim_timeout == 5
    env["KPORT_MODEL"] = "openai:from-env"
    assert load_settings(env=env).model == "openai:from-env"
    assert load_settings({"model": "anthropic:flag"}, env=env).model == "anthropic:flag"


def test_unknown_config_key_names_file_and_key(tmp_path):
    (tmp_path / "config.toml").write_text('modle = "x"\n')
    with pytest.raises(ConfigError, match=r"config\.toml: unknown key 'modle'"):
        load_settings(env={"KPORT_HOME": str(tmp_path)})


def test_bad_toml_names_file(tmp_path):
    (tmp_path / "config.toml").write_text("model = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(env={"KPORT_HOME": str(tmp_path)})


def test_bad_env_value_names_variable(tmp_path):
    with pytest.raises(ConfigError, match="KPORT_SIM_TIMEOUT"):
        load_settings(env={"KPORT_HOME": str(tmp_path), "KPORT_SIM_TIMEOUT": "soon"})


def test_settings_are_frozen(tmp_path):
    s = load_settings(env={"KPORT_HOME": str(tmp_path)})
    with pytest.raises(ValidationError):
        s.model = "x"


@pytest.mark.parametrize("value, normal, checks", [
    ("full", "full", {"bounds", "race", "uninit"}),
    ("FAST", "fast", set()),
    ("race, bounds", "bounds,race", {"bounds", "race"}),
    ("uninit,race,bounds", "full", {"bounds", "race", "uninit"}),
])
def test_sim_checks_are_a_mode_or_a_list(tmp_path, value, normal, checks):
    s = load_settings(env={"KPORT_HOME": str(tmp_path), "KPORT_SIM_CHECKS": value})
    assert s.sim_checks == normal and s.sim_check_set == frozenset(checks)


@pytest.mark.parametrize("value", ["bounds,fast", "races", ",", "full,race"])
def test_bad_sim_checks_name_the_variable_and_the_choices(tmp_path, value):
    with pytest.raises(ConfigError, match="KPORT_SIM_CHECKS: .*'full', 'fast' or a comma list"):
        load_settings(env={"KPORT_HOME": str(tmp_path), "KPORT_SIM_CHECKS": value})
