"""agent.llm: offline without a model, clear errors for missing packages, token counting,
redaction of keys."""

import sys

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from agent import llm
from runners.settings import load_settings
from tests.agent.agent_fakes import reply


def settings(**env):
    return load_settings(env={"KPORT_HOME": "/tmp/kport-llm-test", **env})


def test_no_model_means_offline():
    assert llm.connect(settings()) is None


def test_missing_langchain_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain.chat_models", None)  # import fails
    with pytest.raises(llm.LLMError, match=r"pip install 'kport\[llm\]'"):
        llm.connect(settings(KPORT_MODEL="openai:gpt-4o"))


def test_missing_provider_package_names_the_extra(monkeypatch):
    import langchain.chat_models as chat_models

    def no_provider(model, **kw):
        raise ImportError("Initializing ChatOpenAI requires the langchain-openai package.")

    monkeypatch.setattr(chat_models, "init_chat_model", no_provider)
    with pytest.raises(llm.LLMError, match="langchain-openai.*kport\\[llm\\]"):
        llm.connect(settings(KPORT_MODEL="openai:gpt-4o"))


def test_model_and_base_url_go_to_init_chat_model(monkeypatch):
    import langchain.chat_models as chat_models

    seen = {}
    monkeypatch.setattr(chat_models, "init_chat_model",
                        lambda model, **kw: seen.update(model=model, **kw) or object())
    got = llm.connect(settings(KPORT_MODEL="openai:qwen", KPORT_BASE_URL="http://h:8080/v1"))
    assert seen == {"model": "openai:qwen", "base_url": "http://h:8080/v1"}
    assert got.name == "openai:qwen" and got.base_url == "http://h:8080/v1"


def test_tokens_come_from_usage_metadata_or_an_estimate():
    chat = GenericFakeChatModel(messages=iter([reply("```metal\nx\n```", 120, 30), "plain"]))
    model = llm.LLM("fake", chat)
    counted = model.ask("system", "prompt")
    assert (counted.input_tokens, counted.output_tokens, counted.estimated) == (120, 30, False)
    estimated = model.ask("s" * 400, "p" * 400)
    assert estimated.estimated and estimated.input_tokens == 201 and estimated.tokens > 201


def test_redact_and_public_url_hide_secrets():
    env = {"OPENAI_API_KEY": "sk-secret-value-123", "HOME": "/root"}
    assert llm.redact("key sk-secret-value-123 home /root", env) == "key [redacted] home /root"
    assert llm.public_url("https://u:sk-x@host:8443/v1?key=abc") == "https://host:8443/v1"
    assert llm.public_url(None) is None
