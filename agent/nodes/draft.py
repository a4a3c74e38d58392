"""draft: the next candidate. Offline it is the translator's draft, then whatever mechanical
repair decide queued (``pending``). With an LLM the first draft asks the model to correct the
translator's draft with the rules, analogues and arch facts in view; a repair sends the failed
candidate, its diagnostics and the matching fix rules back.
"""

from __future__ import annotations

from agent.llm import error_text
from agent.prompts import SYSTEM, draft_prompt, parse_reply, repair_prompt
from agent.state import budget_stop, usage_update
from corpus.candidate import Candidate


def ask(ctx, state, prompt: str, base: Candidate, origin: str) -> dict:
    """One LLM request under the budgets; returns the state update: the parsed candidate
    (dumped) and token counts, or ``stop_reason`` when a budget or the provider stops the
    run."""
    stop = budget_stop(state, ctx, prompt)
    if stop:
        return {"stop_reason": stop}
    try:
        reply = ctx.llm.ask(SYSTEM, prompt)
    except Exception as err:  # noqa: BLE001 - any provider failure ends the run as a record
        return {"stop_reason": f"LLM call failed: {error_text(err)}"}
    return {"candidate": parse_reply(reply.text, base, origin).model_dump(),
            **usage_update(state, reply)}


def draft(state, runtime) -> dict:
    """Returns ``candidate`` (and clears ``pending``), or ``stop_reason``."""
    ctx = runtime.context
    if state.get("pending"):
        return {"candidate": state["pending"], "pending": None}
    first = state.get("candidate") is None
    if ctx.llm is None:
        if first:
            draft = Candidate.from_translation(state["translation"], "translator")
            return {"candidate": draft.model_dump()}
        return {"stop_reason": "offline: nothing left to try without an LLM"}
    sizes = dict(ctx.case.sizes)
    if first:
        return ask(ctx, state, draft_prompt(state, ctx.src, sizes),
                   Candidate.from_translation(state["translation"], "llm"), "llm:draft")
    return ask(ctx, state, repair_prompt(state, ctx.src, sizes),
               Candidate.model_validate(state["candidate"]), "llm:repair")


def after_draft(state) -> str:
    """Route: 'finish' when a budget or the provider stopped the run, else 'check'."""
    return "finish" if state.get("stop_reason") else "check"
