"""The porting agent's typed state (checkpointed: plain JSON-like values only) and its frozen
run context (not checkpointed: the case, the source, the LLM, budgets, deadline).

A *candidate* is a corpus.candidate.Candidate (the fields of an MLX ``metal_kernel`` call, its
``origin`` and, for a reply with no usable kernel, ``error``). The state holds it as
``Candidate.model_dump()`` (``candidate``, ``pending``, ``best``, ``attempts``, ``frontier``):
the checkpointer keeps plain JSON-like values, and report.json and the chat show them as they
are; every node reads one back with ``Candidate.model_validate`` and never by key.
"""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from agent.llm import estimate_tokens
from agent.prompts import SYSTEM


@dataclass(frozen=True)
class Budget:
    """Limits of one port: candidates checked, LLM tokens, wall seconds, optimisation
    candidates (0: no optimisation)."""

    iterations: int = 6
    tokens: int = 60_000
    wall_s: float = 900.0
    optimise: int = 3


@dataclass(frozen=True)
class PortContext:
    """What every node may read and nothing checkpoints. ``case`` is an evals CaseSpec (the
    user's, or one guessed from the CUDA source); ``llm`` an agent.llm.LLM or None (offline)."""

    case: Any
    src: str
    kernel: str
    where: str = "<source>"
    origin: list[tuple[str, int]] | None = None  # file and line of each line of src
    llm: Any = None
    budget: Budget = Budget()
    chip: str = "M1"
    seeds: int | None = None
    use_kb: bool = True
    deadline: float = field(default_factory=lambda: time.monotonic() + Budget().wall_s)

    def out_of_time(self) -> bool:
        """Whether the wall-time budget of this run is spent."""
        return time.monotonic() > self.deadline


class PortState(TypedDict, total=False):
    """Everything the agent knows about one port so far; each node returns a part of it."""

    # analyze
    kernel: str
    features: dict
    launch: dict
    translation: dict  # agent.translate_cli.translation_json
    # retrieve
    rules: list[dict]
    rule_lines: list[dict]  # the kernel's lines with the rules that apply at each
    analogues: list[dict]
    arch: list[dict]
    lints: list[dict]
    kb_note: str
    # draft / check / benchmark
    candidate: dict | None  # Candidate.model_dump()
    pending: dict | None  # a mechanically repaired candidate the next draft takes as is
    check: dict
    bench: dict
    feedback: list[str]
    fixes: list[dict]
    # control
    phase: str  # port | optimise
    iteration: int
    llm_calls: int
    input_tokens: int
    output_tokens: int
    tokens_estimated: bool
    decision: str
    stop_reason: str
    best: dict | None  # {"candidate", "score", "check", "bench"} of the best correct port
    tree: list[dict]  # optimisation nodes: id, parent, action, status, score, notes
    frontier: list[dict]  # correct tree nodes: id, score, candidate, tried actions
    expanding: dict  # the tree node and action the current optimisation candidate comes from
    opt_note: str
    attempts: Annotated[list[dict], operator.add]


def tokens_used(state: PortState) -> int:
    """LLM tokens spent so far."""
    return int(state.get("input_tokens", 0)) + int(state.get("output_tokens", 0))


def usage_update(state: PortState, reply) -> dict:
    """The state update recording one LLM reply's tokens."""
    return {"llm_calls": state.get("llm_calls", 0) + 1,
            "input_tokens": state.get("input_tokens", 0) + reply.input_tokens,
            "output_tokens": state.get("output_tokens", 0) + reply.output_tokens,
            "tokens_estimated": state.get("tokens_estimated", False) or reply.estimated}


def budget_stop(state: PortState, ctx: PortContext, prompt: str | None = None) -> str:
    """Why the run must stop now ('' when it may go on): candidates checked, wall time, and,
    before an LLM call with ``prompt``, whether its estimated size would pass the token budget."""
    if state.get("iteration", 0) >= ctx.budget.iterations:
        return f"iteration budget spent ({ctx.budget.iterations} candidates checked)"
    if ctx.out_of_time():
        return f"wall-time budget spent ({ctx.budget.wall_s:g} s)"
    if prompt is not None:
        need = tokens_used(state) + estimate_tokens(SYSTEM + prompt)
        if need > ctx.budget.tokens:
            return (f"token budget spent: {tokens_used(state)} used, the next request needs "
                    f"~{need - tokens_used(state)} more, budget {ctx.budget.tokens}")
    return ""
