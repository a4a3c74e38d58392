"""Fixtures for the porting agent: corpus cases, a scripted fake chat model, a run context."""

import time

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from tests.agent.agent_fakes import reply


@pytest.fixture
def fake_llm():
    """``fake_llm(*replies)``: an agent.llm.LLM over GenericFakeChatModel answering in order."""
    from agent.llm import LLM

    def make(*replies):
        msgs = [r if isinstance(r, AIMessage) else reply(r) for r in replies]
        return LLM("fake:scripted", GenericFakeChatModel(messages=iter(msgs)))

    return make


@pytest.fixture(scope="session")
def saxpy():
    from corpus.cases import discover

    return discover(ids=["001"])[0]


@pytest.fixture
def port_ctx(saxpy):
    """``port_ctx(llm=None, case=saxpy, **budget)``: a PortContext without the KB, one seed."""
    from agent.state import Budget, PortContext

    def make(llm=None, case=None, **budget):
        case = case or saxpy
        return PortContext(case=case, src=(case.folder / case.cuda.source).read_text(),
                           kernel=case.cuda.kernel, llm=llm, budget=Budget(**budget),
                           use_kb=False, seeds=1, deadline=time.monotonic() + 300)

    return make
