"""What the agent asks an LLM, and how it reads the answer.

Every request carries the MLX ``metal_kernel`` contract, the CUDA kernel, the candidate's call
(inputs, outputs, launch) and what the knowledge base retrieved; the answer is a kernel body in
a fenced ``metal`` block, optional helpers in a ``header`` block, and optional launch changes in
a ``json`` block (grid, threadgroup, template: expressions over the case's size names).
"""

from __future__ import annotations

import json
import re

from corpus.candidate import Candidate

SYSTEM = """You port CUDA kernels to Apple Metal for MLX's mx.fast.metal_kernel.
The contract:
- You write only the BODY of the kernel function. MLX generates the signature from the input
  and output names: array inputs are `const device T* name`, 0-d (scalar) inputs are
  `const constant T& name`, outputs are `device T* name` (`device atomic<T>*` when
  atomic_outputs is set). Keep every input and output name exactly as given.
- Thread attributes are used by name in the body and MLX declares them: thread_position_in_grid,
  thread_position_in_threadgroup, threadgroup_position_in_grid, threads_per_threadgroup,
  threadgroups_per_grid, thread_index_in_simdgroup, simdgroup_index_in_threadgroup (uint3 or uint).
- Helper functions, structs and constants go in the HEADER; they cannot use thread attributes
  (pass values in as arguments).
- There is no dynamic threadgroup memory: size `threadgroup` arrays with constants or template
  ints. The MLX grid counts threads, not threadgroups. No double precision.
- The port must give the same results as the CUDA kernel at every size, with no out-of-bounds
  access, race or uninitialised read.
Answer with one ```metal block holding the body; add a ```header block only if you need helpers
and a ```json block only to change the launch ({"grid": [...], "threadgroup": [...],
"template": {...}}, expressions over the size names). No prose is needed."""

_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)```", re.S)


def _call(c: Candidate) -> str:
    return (f"inputs={c.inputs} outputs={c.outputs}\n"
            f"grid (threads)={c.grid} threadgroup={c.threadgroup}\n"
            f"template={c.template} atomic_outputs={c.atomic_outputs} init_value={c.init_value}")


def _port(c: Candidate) -> str:
    head = c.header.strip()
    return ((f"```header\n{head}\n```\n" if head else "")
            + f"```metal\n{c.body.strip()}\n```\n{_call(c)}")


def _knowledge(state: dict, limit_rules: int = 12) -> str:
    parts = []
    rules = state.get("rules") or []
    if rules:
        parts.append("Concept rules for the CUDA constructs in this kernel:")
        parts += [f"- {r['title']}: {r['metal']}"
                  + "".join(f" Pitfall: {p}" for p in r.get("pitfalls", [])[:1])
                  for r in rules[:limit_rules]]
    facts = state.get("arch") or []
    if facts:
        parts.append("Apple GPU facts:")
        parts += [f"- {f['id']}: {f['fact']}" for f in facts]
    for a in state.get("analogues") or []:
        parts.append(f"A ported analogue ({a['title']}):\n```cuda\n{a['cuda']}\n```\n"
                     f"```metal\n{a['metal']}\n```")
    return "\n".join(parts)


def draft_prompt(state: dict, src: str, sizes: dict) -> str:
    """The first request: correct and complete the translator's draft."""
    tr = state["translation"]
    todos = "\n".join(f"- {t.get('file') or 'line'}:{t['line']}: {t['construct']} "
                      f"({t['rule']}) -> {t['metal']}"
                      for t in tr.get("todos", [])) or "- none"
    return (f"CUDA source (kernel `{state['kernel']}`):\n```cuda\n{src}\n```\n"
            f"Size names and default values: {json.dumps(sizes)}\n\n"
            f"An offline translator's draft of the Metal port:\n"
            f"{_port(Candidate.from_translation(tr))}\n"
            f"Constructs it left as KPORT-TODO:\n{todos}\n\n{_knowledge(state)}\n\n"
            "Return the corrected, complete body (and header). If the draft is already "
            "correct, return it unchanged.")


def repair_prompt(state: dict, src: str, sizes: dict) -> str:
    """A repair request: the failed candidate, what failed, and the matching fix rules."""
    fixes = "\n".join(f"- {f['title']}: {f['fix']}" for f in state.get("fixes") or []) or "- none"
    failures = "\n".join(f"- {line}" for line in state.get("feedback") or [])
    return (f"CUDA source (kernel `{state['kernel']}`):\n```cuda\n{src}\n```\n"
            f"Size names and default values: {json.dumps(sizes)}\n\n"
            f"This Metal port failed:\n{_port(Candidate.model_validate(state['candidate']))}\n"
            f"What failed (compiler, simulator sanitizers, comparison with the CUDA oracle):\n"
            f"{failures}\nKnown fixes for these errors:\n{fixes}\n\n{_knowledge(state)}\n\n"
            "Return a corrected body (and header).")


def optimise_prompt(state: dict, src: str, candidate: Candidate, action: dict, facts: list[dict],
                    lints: list[dict]) -> str:
    """A rewrite request for one optimisation action on a correct candidate."""
    facts_text = "\n".join(f"- {f['id']}: {f['fact']}" for f in facts) or "- none"
    lint_text = "\n".join(f"- {x['severity']}: {x['message']}" for x in lints) or "- none"
    return (f"CUDA source (kernel `{state['kernel']}`):\n```cuda\n{src}\n```\n"
            f"This Metal port is correct:\n{_port(candidate)}\n"
            f"Performance lints on it:\n{lint_text}\n\n"
            f"Optimisation to try: {action['title']}. {action['instruction']}\n"
            f"Apple GPU facts behind it:\n{facts_text}\n\n"
            "Return the rewritten body (and header, and launch if it changes). Results must "
            "stay equal to the CUDA kernel's within floating-point tolerance.")


def parse_reply(text: str, base: Candidate, origin: str) -> Candidate:
    """A candidate from an answer: ``base`` with the body, header and launch (grid,
    threadgroup, template; never the argument names) the answer gives. When no body block is
    found it is ``base`` with ``error`` set (a failed record, not an exception)."""
    body, header, launch = None, None, {}
    for label, content in _FENCE.findall(text):
        label = label.lower()
        if label == "header":
            header = content
        elif label == "json":
            try:
                data = json.loads(content)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                launch = data
        elif body is None and label in ("metal", "msl", "cpp", "c++", "c", ""):
            body = content
    if body is None or not body.strip():
        return base.model_copy(update={
            "origin": origin, "error": "the reply has no ```metal block with a kernel body"})
    out = {"origin": origin, "error": None, "body": body.strip("\n") + "\n"}
    if header is not None:
        out["header"] = header.strip("\n")
    for key in ("grid", "threadgroup"):
        if isinstance(launch.get(key), list) and 1 <= len(launch[key]) <= 3:
            out[key] = [v if isinstance(v, int) else str(v) for v in launch[key]]
    if isinstance(launch.get("template"), dict):
        out["template"] = {str(k): v for k, v in launch["template"].items()
                           if isinstance(v, (bool, int, str))}
    return Candidate.model_validate({**base.model_dump(), **out})
