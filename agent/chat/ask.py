"""Free-form turns of `kport chat`: a question about the port, or a change request.

With a model (KPORT_MODEL) the answer streams token by token, grounded in what kport knows:
the CUDA kernel, the current Metal version and its last check, the concept rules that apply,
and knowledge-base hits for the question. Every answer ends with the sources it was given
(rule ids, analogue titles), printed by kport, not left to the model. An answer holding a
```metal block becomes a new version. Without a model the turn says how to configure one and
shows what the knowledge base has for the question (that needs no model).
"""

from __future__ import annotations

from agent.chat.state import add_version, candidate_of
from agent.chat.versions import metal_of
from agent.llm import content_text, error_text, estimate_tokens, redact
from agent.nodes.retrieve import kernel_text
from agent.prompts import parse_reply
from kb.ready import ready_store
from kb.search import search
from runners.errors import KportError

CHAT_SYSTEM = """You are kport's porting assistant: you help a kernel engineer port a CUDA
kernel to Apple Metal for MLX's mx.fast.metal_kernel (you write only kernel BODIES; MLX
generates the signature from the input/output names; helpers go in a header; thread
attributes are used by name; no dynamic threadgroup memory; the MLX grid counts threads).
Ground every claim in the context given: cite concept rules by id in brackets, e.g.
[sync.syncthreads], and analogues by title. Say so when the context does not settle a point.
When the user asks for a change to the kernel, answer with the complete new body in one
```metal block (and a ```header block only if helpers change); otherwise answer in prose."""

HISTORY_TURNS = 6
KB_HITS = 6


def offline_text(session: str, offline_flag: bool) -> str:
    """What a free-form turn says when no model is configured."""
    why = ("this session was started with --offline" if offline_flag else
           "no model is configured (KPORT_MODEL is not set)")
    return (f"Free-form questions and change requests need a language model: {why}.\n"
            "To configure one, set KPORT_MODEL (provider:model) and the provider's key, e.g.\n"
            "  export KPORT_MODEL=openai:gpt-4o OPENAI_API_KEY=...\n"
            "  export KPORT_MODEL=anthropic:claude-sonnet-4-5 ANTHROPIC_API_KEY=...\n"
            "  export KPORT_MODEL=openai:qwen2.5-coder KPORT_BASE_URL=http://127.0.0.1:8080/v1"
            "   (any OpenAI-compatible server: mlx_lm.server, llama-server, vLLM)\n"
            "then `pip install 'kport[llm]'` and come back with "
            f"`kport chat --resume {session}`.\n"
            "Without a model these still work: /port /check /bench /diff /show /edit /rules "
            "/analogues /search /save (/help lists all).")


def kb_hits(question: str, settings) -> tuple[list, str]:
    """(hits, note) from the knowledge base for ``question`` (built on first use); no hits and
    a note saying why when there is no KB and none can be built."""
    try:
        store, built = ready_store(settings)
        hits = search(store, question, k=KB_HITS, cache_root=settings.home / "cache")
    except KportError as err:
        return [], f"no knowledge-base search: {err}"
    return hits, (f"{built}; " if built else "") + f"{len(hits)} knowledge-base hit(s)"


def _context(state: dict, hits: list) -> str:
    parts = []
    if state.get("kernel"):
        parts.append(f"CUDA kernel `{state['kernel']}`:\n```cuda\n"
                     f"{kernel_text(state['src'], state['kernel'])}\n```")
        ver = state["versions"][-1]
        rec = state.get("checks", {}).get(str(ver["n"]))
        status = ("not checked" if rec is None else "correct at every size set" if
                  rec.get("ok") else "NOT correct: " + "; ".join(rec.get("feedback", [])[:3]))
        parts.append(f"Current Metal version v{ver['n']} ({ver['origin']}; {status}):\n"
                     f"```metal\n{metal_of(state, ver)}\n```")
        rules = state.get("rules", [])
        if rules:
            parts.append("Concept rules that apply to this kernel:\n" + "\n".join(
                f"- [{r['rule_id']}] {r['title']}: {r['metal']}"
                + "".join(f" Pitfall: {p}" for p in r.get("pitfalls", [])[:1])
                + (" (UNCONFIRMED)" if r.get("unconfirmed") else "") for r in rules[:16]))
    for h in hits:
        label = h.metadata.get("rule_id") or h.id
        parts.append(f"Knowledge base ({h.kind}) [{label}] {h.title}:\n{h.text[:1200]}")
    return "\n\n".join(parts) or "No kernel is loaded."


def _history(state: dict) -> list:
    # lazy: langchain_core is slow to import; only a turn with a model needs it
    from langchain_core.messages import AIMessage, HumanMessage

    out = []
    for entry in (state.get("transcript") or [])[-2 * HISTORY_TURNS:]:
        cls = HumanMessage if entry["role"] == "user" else AIMessage
        out.append(cls(content=entry["text"][:2000]))
    return out


def sources_line(state: dict, hits: list) -> str:
    """The sources a grounded answer was given, as kport prints them after it."""
    rules = [r["rule_id"] for r in state.get("rules", [])[:16]]
    rules += [h.metadata.get("rule_id") or h.id for h in hits if h.kind == "rules"]
    analogues = [h.title for h in hits if h.kind == "analogues"]
    analogues += [a["title"] for a in state.get("analogues", [])]
    other = [f"{h.kind}:{h.title}" for h in hits if h.kind not in ("rules", "analogues")]
    parts = [f"rules {', '.join(dict.fromkeys(rules))}" if rules else "",
             f"analogues {'; '.join(dict.fromkeys(analogues))}" if analogues else "",
             f"also {'; '.join(other)}" if other else ""]
    return "sources: " + (" | ".join(p for p in parts if p) or "none (no kernel, no KB)")


def ask(state: dict, question: str, ctx, say) -> dict:
    """Answer a free-form turn; returns the state update (a new version when the answer holds
    a kernel body, and the tokens spent)."""
    hits, note = kb_hits(question, ctx.settings)
    if ctx.llm is None:
        say(offline_text(ctx.session, ctx.offline_flag))
        if hits:
            say("From the knowledge base (no model needed):")
            for h in hits[:3]:
                say(f"  [{h.kind}] {h.metadata.get('rule_id') or h.id}: {h.title}")
        else:
            say(f"({note})")
        return {}
    from langchain_core.messages import HumanMessage, SystemMessage  # lazy: as in _history

    messages = [SystemMessage(content=CHAT_SYSTEM), *_history(state),
                HumanMessage(content=f"{_context(state, hits)}\n\nUser: {question}")]
    answer, full = [], None
    try:
        for chunk in ctx.llm.chat.stream(messages):
            text = content_text(chunk.content)
            if text:
                answer.append(text)
                say(redact(text), end="")
            full = chunk if full is None else full + chunk  # merges usage as langchain does
    except Exception as err:  # noqa: BLE001 - providers raise their own types; say it, go on
        say(f"\nthe model call failed: {error_text(err)}")
        return {}
    say()
    say(sources_line(state, hits))
    text = "".join(answer)
    usage = getattr(full, "usage_metadata", None) or {}
    spent = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    update = {"llm_tokens": state.get("llm_tokens", 0) + (spent or estimate_tokens(
        "".join(str(m.content) for m in messages) + text))}
    if not spent:
        update["llm_tokens_estimated"] = True
    if state.get("kernel") and "```" in text:
        base = candidate_of(state["versions"][-1])
        cand = parse_reply(text, base, "chat")
        if not cand.error and (cand.body, cand.header) != (base.body, base.header):
            new, versions = add_version(state, cand, "chat")
            update["versions"] = versions
            say(f"the answer holds a kernel body: it is v{new['n']} (chat); /diff shows the "
                "change, /check checks it")
    return update
