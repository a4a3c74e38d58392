"""The chat graph: one run per turn, checkpointed per session (thread id = session id).

    START -> turn -> END
    turn  -> approve -> END        (when the turn planned a write: /save)

``turn`` runs a slash command (agent/chat/commands.py) or a free-form turn (agent/chat/ask.py)
and streams its output through langgraph's custom stream. ``approve`` pauses the run with
``interrupt()`` until the user answers; only an answer of yes writes. A session killed
mid-turn resumes by running that turn again (a /port continues its own checkpoint thread); a
session killed at the question asks it again.
"""

from __future__ import annotations

import contextvars
from pathlib import Path

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from agent.chat.ask import ask
from agent.chat.commands import dispatch
from agent.chat.state import ChatContext, ChatState, Say, candidate_of, load_case_of, version
from agent.graph import build_graph
from agent.nodes.bench import measure
from agent.out_folder import write_folder
from agent.package import write_package
from agent.report import build_report, write_report
from agent.session import checkpointer as port_checkpointer
from agent.state import Budget
from runners.errors import KportError

RECURSION_LIMIT = 10
YES = ("y", "yes")


def turn(state: ChatState, runtime) -> dict:
    """Run the turn's line; a KportError is answered as ``error: ...`` and the session goes
    on. Returns the state update with this turn's transcript entries."""
    ctx = runtime.context
    say = Say(get_stream_writer())
    line = (state.get("line") or "").strip()
    update: dict = {}
    try:
        if line.startswith("/"):
            update = dispatch(state, line, ctx, say)
        elif line:
            update = ask(state, line, ctx, say)
    except KportError as err:
        say(f"error: {err}")
        update = {}
    return {**update, "session": ctx.session, "turn": state.get("turn", 0) + 1,
            "transcript": [{"role": "user", "text": line}, {"role": "kport", "text": say.text()}]}


def question(plan: dict) -> str:
    """The approval question for a planned write."""
    replaces = f"; replaces {', '.join(plan['replaces'])}" if plan.get("replaces") else ""
    return (f"write the package of v{plan['version']} into {plan['dir']} "
            f"({', '.join(plan['files'])}{replaces})?")


def approve(state: ChatState, runtime) -> dict:
    """Ask before writing (``interrupt``); write the package on yes."""
    plan = state["pending_write"]
    answer = interrupt({"question": question(plan), "dir": plan["dir"],
                        "files": plan["files"]})
    say = Say(get_stream_writer())
    if str(answer).strip().lower() in YES:
        try:
            written = write_saved(state, plan, runtime.context)
            say(f"wrote {len(written)} file(s) to {plan['dir']}: {', '.join(written)}")
            say(f"  try it: cd {plan['dir']} && python -m pytest -q test_kernel.py")
        except (KportError, OSError) as err:
            say(f"error: nothing more written: {err}")
    else:
        say("not written (you said no)")
    return {"pending_write": None, "transcript": [{"role": "kport", "text": say.text()}]}


def after_turn(state: ChatState) -> str:
    return "approve" if state.get("pending_write") else END


def build_chat_graph(checkpointer=None):
    """The compiled chat graph; a SqliteSaver checkpointer makes sessions resumable."""
    g = StateGraph(ChatState, context_schema=ChatContext)
    g.add_node("turn", turn)
    g.add_node("approve", approve)
    g.add_edge(START, "turn")
    g.add_conditional_edges("turn", after_turn, {"approve": "approve", END: END})
    g.add_edge("approve", END)
    return g.compile(checkpointer=checkpointer)


def _port_values(thread: str, settings) -> dict:
    """The final state of a /port run (its own checkpoint thread), or {}."""
    def read() -> dict:
        with port_checkpointer(settings) as saver:
            snap = build_graph(saver).get_state({"configurable": {"thread_id": thread}})
            return dict(snap.values)

    return contextvars.Context().run(read)


def write_saved(state: ChatState, plan: dict, ctx) -> list[str]:
    """Write the package and report of version ``plan['version']`` into ``plan['dir']``;
    returns the file names written."""
    ver = version(state, plan["version"])
    case = load_case_of(state)
    cand = candidate_of(ver)
    rec = state.get("checks", {}).get(str(ver["n"])) or {}
    port = state.get("port") or {}
    values = _port_values(port["thread"], ctx.settings) if port.get("version") == ver["n"] \
        else {}
    notes = [f"saved from kport chat session {ctx.session}: v{ver['n']} ({ver['origin']})"]
    if rec.get("ok"):
        bench = state.get("benches", {}).get(str(ver["n"])) or measure(cand, case, ctx.chip)
        best = {"candidate": cand.model_dump(), "check": rec, "bench": bench}
        stop = values.get("stop_reason") or "correct at every size set and seed (kport chat)"
    else:
        best, stop = None, "the saved version is not correct: " + "; ".join(
            rec.get("feedback", [])[:2])
    guessed_dir = case.folder if state.get("guessed") else None
    full = {**values, "kernel": state["kernel"], "translation": state.get("translation") or {},
            "rules": state.get("rules", []), "check": rec, "best": best, "stop_reason": stop}
    package: dict = {}

    def fill(stage: Path) -> None:  # the whole package, put in place at once
        package.update(write_package(stage, case=case, kernel=state["kernel"], candidate=cand,
                                     guessed_case=guessed_dir))
        rep = build_report(full, source=state["file"], case=case,
                           mode="llm" if ctx.llm else "offline",
                           llm_name=ctx.llm.name if ctx.llm else None,
                           base_url=ctx.llm.base_url if ctx.llm else None,
                           thread_id=port.get("thread") or ctx.session, chip=ctx.chip,
                           budget=Budget(), guessed=state.get("guessed", []), package=package,
                           extra_notes=notes + list(package.get("oracle_notes", [])))
        rep["shipped"] = ver["origin"]
        write_report(stage, rep)

    write_folder(Path(plan["dir"]), fill, command="kport chat /save",
                 force=bool(plan.get("force")))
    return package["files"]
