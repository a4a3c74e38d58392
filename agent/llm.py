"""LLM providers for the agent, through langchain's ``init_chat_model``.

``KPORT_MODEL`` names the model as ``provider:model`` (``openai:gpt-4o``,
``anthropic:claude-sonnet-4-5``, ``ollama:qwen2.5-coder``); ``KPORT_BASE_URL`` points it at any
OpenAI-compatible server (mlx_lm.server, vLLM, llama-server). API keys come only from the
providers' own environment variables (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...): kport never
reads, logs or writes them, and ``redact`` scrubs any that leak into text it writes.
No model configured means offline mode: ``connect`` returns None.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlparse

from runners.errors import KportError

INSTALL_HINT = "pip install 'kport[llm]'"
_SECRET_VAR = re.compile(r"(API_KEY|_TOKEN|SECRET|PASSWORD)", re.I)
_injected = None  # a chat model set by use_chat_model (tests, embedding applications)


class LLMError(KportError):
    """The configured model cannot be loaded; the message says what to install or set."""


@dataclass(frozen=True)
class Reply:
    """One answer: its text and the tokens it cost (``estimated`` when the provider gave no
    usage_metadata and kport counted ~4 characters a token)."""

    text: str
    input_tokens: int
    output_tokens: int
    estimated: bool = False

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class LLM:
    """A chat model and the name it was configured by (what reports show; never a key)."""

    name: str
    chat: object  # a langchain BaseChatModel
    base_url: str | None = None

    def ask(self, system: str, prompt: str) -> Reply:
        """Send one system + user message; returns the Reply. Provider errors (network,
        authentication, rate limits) propagate with their own types: the caller records them."""
        # lazy: langchain_core is slow to import; only a call to a model needs it
        from langchain_core.messages import HumanMessage, SystemMessage

        msg = self.chat.invoke([SystemMessage(content=system), HumanMessage(content=prompt)])
        text = content_text(msg.content)
        usage = getattr(msg, "usage_metadata", None) or {}
        if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None:
            return Reply(text, int(usage.get("input_tokens") or 0),
                         int(usage.get("output_tokens") or 0))
        return Reply(text, estimate_tokens(system + prompt), estimate_tokens(text), True)


def content_text(content) -> str:
    """A message's (or a streamed chunk's) content as text: a string as is, a list of blocks
    (Anthropic style) joined."""
    if isinstance(content, str):
        return content
    return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)


def estimate_tokens(text: str) -> int:
    """A provider-independent token estimate: one token per ~4 characters."""
    return len(text) // 4 + 1


def use_chat_model(chat) -> None:
    """Use ``chat`` (any langchain chat model, e.g. GenericFakeChatModel) instead of loading
    KPORT_MODEL; ``None`` restores normal loading. For tests and embedding applications."""
    global _injected
    _injected = chat


def connect(settings) -> LLM | None:
    """The configured LLM, or None in offline mode (no KPORT_MODEL). Raises LLMError when
    langchain or the provider's package is missing, or the model name is not understood."""
    if _injected is not None:
        return LLM(settings.model or "injected-test-model", _injected, settings.base_url)
    if not settings.model:
        return None
    try:
        # lazy: optional (kport[llm]); offline mode never imports it
        from langchain.chat_models import init_chat_model
    except ImportError:
        raise LLMError(f"KPORT_MODEL={settings.model} needs langchain: {INSTALL_HINT} "
                       "(or unset KPORT_MODEL / pass --offline)") from None
    kwargs = {"base_url": settings.base_url} if settings.base_url else {}
    try:
        chat = init_chat_model(settings.model, **kwargs)
    except ImportError as err:
        raise LLMError(f"KPORT_MODEL={settings.model}: the provider's package is missing "
                       f"({_first_line(err)}); {INSTALL_HINT}") from None
    except ValueError as err:
        raise LLMError(f"KPORT_MODEL={settings.model}: {_first_line(err)}; write it as "
                       "provider:model, e.g. openai:gpt-4o or ollama:qwen2.5-coder") from None
    return LLM(settings.model, chat, settings.base_url)


def _first_line(err: Exception) -> str:
    return redact(str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__)


def public_url(url: str | None) -> str | None:
    """``url`` without user:password and query (tokens sometimes ride there), for reports."""
    if not url:
        return None
    u = urlparse(url)
    host = u.hostname or ""
    port = f":{u.port}" if u.port else ""
    return f"{u.scheme}://{host}{port}{u.path}" if u.scheme else url.split("?")[0]


def redact(text: str, env: dict | None = None) -> str:
    """``text`` with the value of every secret-looking environment variable (``*API_KEY*``,
    ``*_TOKEN*``, ``*SECRET*``, ``*PASSWORD*``) replaced by ``[redacted]``."""
    env = os.environ if env is None else env
    for var, value in env.items():
        if _SECRET_VAR.search(var) and value and len(value) >= 6 and value in text:
            text = text.replace(value, "[redacted]")
    return text


def error_text(err: BaseException) -> str:
    """A provider exception as one redacted line for reports."""
    return f"{type(err).__name__}: {_first_line(err)}"[:300]
