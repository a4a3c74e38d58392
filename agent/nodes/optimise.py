"""optimise: K-Search-style best-first search over rewrites of a correct port. Each tree node
is a correct candidate with its score; expanding one applies an action to the best-scored node
with an action left untried, and the result is checked like any candidate: correct ones are
scored (a Mac's time, else the cost model's predicted time) and join the frontier, incorrect
ones are rejected. The best-scored correct node is what the agent ships.

Offline the actions are agent.rewrites' mechanical rewrites (SIMD-group collectives, narrowed
barrier flags, unrolling, vector accesses, template and threadgroup size sweeps), a rewrite
that gives a candidate already in the tree skipped; with an LLM they are requests drawn from
the Apple-GPU architecture rules (``ACTIONS``), scored the same way. In the optimise phase
the check node runs a correct rewrite at held-out sizes too (agent/nodes/check.py).
"""

from __future__ import annotations

from agent.nodes.draft import ask
from agent.nodes.retrieve import arch_facts
from agent.prompts import optimise_prompt
from agent.rewrites import Proposal, fingerprint, propose
from corpus.candidate import Candidate

# id, title, facts (kb/rules/arch/features.toml), feature flags that make it apply (empty:
# always), lints that make it urgent, and the request.
ACTIONS: tuple[dict, ...] = (
    {"id": "simd_reduction", "title": "SIMD-group reductions", "facts": ("F1", "F7", "F9"),
     "when": ("f_warp", "f_shared"), "lints": (),
     "instruction": "Replace shuffle trees and threadgroup-memory tree reductions with Metal's "
                    "SIMD-group collectives (simd_sum, simd_max, simd_min, simd_prefix_*): one "
                    "call reduces 32 lanes. Keep threadgroup memory only to combine the "
                    "SIMD-groups of a threadgroup, with the barriers that needs."},
    {"id": "threadgroup_size", "title": "threadgroup size", "facts": ("F1", "F2", "F4"),
     "when": (), "lints": ("threadgroup.partial_simdgroup", "threadgroup.too_many_threads"),
     "instruction": "Pick a threadgroup size that is a multiple of the SIMD width 32 and suits "
                    "occupancy (256 to 1024 threads); change the launch in a json block and "
                    "every constant or template value that depends on it together."},
    {"id": "vector_loads", "title": "vector loads and stores", "facts": ("F7",),
     "when": (), "lints": (),
     "instruction": "Have each thread load and store contiguous elements as vector types "
                    "(float4, half4) where alignment allows, handle the tail element-wise, and "
                    "shrink the grid to match (json block)."},
    {"id": "tgmem_padding", "title": "threadgroup memory padding", "facts": ("F3", "F6"),
     "when": ("f_shared",), "lints": (),
     "instruction": "Pad 2-D threadgroup arrays by one element (16 bytes) per row so that "
                    "column accesses fall in different banks, staying under 32 KB."},
)


def applicable(features: dict, lints: list[dict]) -> list[dict]:
    """Actions whose feature flags the kernel has (or that always apply), urgent ones (a lint
    asks for them) first."""
    found = {x["id"] for x in lints}
    acts = [a for a in ACTIONS if not a["when"] or any(features.get(f) for f in a["when"])]
    return sorted(acts, key=lambda a: not (set(a["lints"]) & found))


def better(a: dict, b: dict | None) -> bool:
    """Score ``a`` strictly beats ``b`` (same kind; lower value wins)."""
    return b is None or (a["kind"] == b["kind"] and a["value"] < b["value"])


# A rewrite is shipped over its parent's best only when the model predicts it at least this
# much faster: smaller differences are within the model's error (docs/perf-model.md), and each
# rewrite is a risk the harness judges at the case's sizes only.
MODEL_MARGIN = 0.05


def clearly_better(a: dict, b: dict | None) -> bool:
    """``better``, and for the cost model's predictions by at least MODEL_MARGIN."""
    if b is None or a["kind"] != "model":
        return better(a, b)
    return a["kind"] == b["kind"] and a["value"] < b["value"] * (1 - MODEL_MARGIN)


def next_expansion(frontier: list[dict], features: dict) -> tuple[dict, dict] | None:
    """The best frontier node with an untried applicable action, and that action."""
    for node in _by_score(frontier):
        lints = node.get("lints", [])
        for action in applicable(features, lints):
            if action["id"] not in node["tried"]:
                return node, action
    return None


def _by_score(frontier: list[dict]) -> list[dict]:
    return sorted(frontier, key=lambda n: (n["score"]["value"], n["id"]))


def next_rewrite(frontier: list[dict], tree: list[dict], case) -> tuple[dict, Proposal] | None:
    """The best frontier node with an untried mechanical rewrite whose candidate is not in
    ``tree`` yet (by fingerprint) and whose action was not rejected elsewhere in the tree (as
    K-Search marks an action too hard), and that rewrite; None when there is none."""
    seen = {n.get("fingerprint") for n in tree}
    failed = {n["action"] for n in tree if n["status"] == "rejected"}
    for node in _by_score(frontier):
        for prop in propose(Candidate.model_validate(node["candidate"]), case):
            if prop.action not in node["tried"] and prop.action not in failed and \
                    fingerprint(prop.candidate) not in seen:
                return node, prop
    return None


def _mark_tried(frontier: list[dict], node: dict, action: str) -> list[dict]:
    return [{**n, "tried": n["tried"] + [action]} if n["id"] == node["id"] else n
            for n in frontier]


def optimise(state, runtime) -> dict:
    """Expands one (node, action): returns the rewritten candidate, ``expanding``, the frontier
    with the action marked tried, token counts; or ``stop_reason``."""
    ctx = runtime.context
    if ctx.llm is None:
        found = next_rewrite(state.get("frontier", []), state.get("tree", []), ctx.case)
        if found is None:
            return {"stop_reason": "optimisation: every applicable rewrite was tried"}
        node, prop = found
        return {"candidate": prop.candidate.model_dump(),
                "frontier": _mark_tried(state["frontier"], node, prop.action),
                "expanding": {"parent": node["id"], "action": prop.action, "title": prop.title}}
    pick = next_expansion(state.get("frontier", []), state.get("features", {}))
    if pick is None:
        return {"stop_reason": "optimisation: every applicable action was tried"}
    node, action = pick
    frontier = _mark_tried(state["frontier"], node, action["id"])
    base = Candidate.model_validate(node["candidate"])
    prompt = optimise_prompt(state, ctx.src, base, action, arch_facts(action["facts"]),
                             node.get("lints", []))
    update = ask(ctx, state, prompt, base, f"opt:{action['id']}")
    return {**update, "frontier": frontier,
            "expanding": {"parent": node["id"], "action": action["id"], "title": action["title"]}}
