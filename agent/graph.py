"""The porting agent's graph, built and validated in this one place (agent/session.py runs it).

    START -> analyze -> retrieve -> draft -> check -> benchmark -> decide
    draft    -> check | finish                      (finish: a budget or the provider stopped)
    decide   -> draft (repair) | optimise | finish
    optimise -> check | finish
    finish   -> END

State is agent.state.PortState (checkpointed), the run context agent.state.PortContext.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from agent.nodes.analyze import analyze
from agent.nodes.bench import benchmark
from agent.nodes.check import check
from agent.nodes.decide import after_decide, decide, finish
from agent.nodes.draft import after_draft, draft
from agent.nodes.optimise import optimise
from agent.nodes.retrieve import retrieve
from agent.state import PortContext, PortState

NODES = {"analyze": analyze, "retrieve": retrieve, "draft": draft, "check": check,
         "benchmark": benchmark, "decide": decide, "optimise": optimise, "finish": finish}


def build_graph(checkpointer=None, *, interrupt_after: list[str] | None = None):
    """The compiled graph (langgraph validates it: every edge names a node, every node is
    reachable); ``checkpointer`` e.g. a SqliteSaver makes runs resumable by thread id, and
    ``interrupt_after`` pauses after the named nodes (tests of resuming)."""
    g = StateGraph(PortState, context_schema=PortContext)
    for name, fn in NODES.items():
        g.add_node(name, fn)
    g.add_edge(START, "analyze")
    g.add_edge("analyze", "retrieve")
    g.add_edge("retrieve", "draft")
    g.add_conditional_edges("draft", after_draft, {"check": "check", "finish": "finish"})
    g.add_edge("check", "benchmark")
    g.add_edge("benchmark", "decide")
    g.add_conditional_edges("decide", after_decide,
                            {"draft": "draft", "optimise": "optimise", "finish": "finish"})
    g.add_conditional_edges("optimise", after_draft, {"check": "check", "finish": "finish"})
    g.add_edge("finish", END)
    return g.compile(checkpointer=checkpointer, interrupt_after=interrupt_after)


def recursion_limit(budget) -> int:
    """Graph steps a run may take: four per candidate checked, plus set-up and finish."""
    return 8 + 5 * (budget.iterations + budget.optimise + 2)
