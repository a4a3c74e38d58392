"""One case of a batch eval, as one task for a worker process: port the case (offline: the
translator's draft; llm: the porting agent), judge the port through the cheat-proof harness
with the port's own launch, and return the result line of results.jsonl.

A task carries the case folder's files, not a path, so a worker on another machine (a Ray
node, a Mac of a fleet) needs only kport installed. A failed or slow port is a record
(``correct: false`` with its reasons); only a broken harness raises.
"""

from __future__ import annotations

import contextlib
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import runners
from agent.harness import judge
from agent.llm import connect
from agent.nodes.bench import measure
from agent.repairs import diagnosis_ids, mechanical_repair
from agent.report import shipped
from agent.state import Budget, PortContext, tokens_used
from agent.translate import translate_kernel
from corpus.candidate import Candidate
from corpus.cases import CaseError, CaseSpec, evaluate, load_case
from runners.errors import KportError
from runners.lifetime import temp_folder
from runners.settings import load_settings

MODES = ("offline", "llm")
MAX_CASE_BYTES = 8 << 20
# The fields of one line of results.jsonl, in the order they are written.
RESULT_FIELDS = ("case", "category", "mode", "compiled", "correct", "reasons", "todos",
                 "coverage", "iterations", "wall_s", "llm_tokens", "speedup", "runs", "notes")


class CaseBudgetSpent(Exception):
    """The case's wall-time budget ran out (raised by the alarm inside a worker)."""


@dataclass(frozen=True)
class CaseTask:
    """What a worker needs for one case: its id, where it came from (for messages), its folder's
    files (relative path -> bytes), the mode, seeds per size set, the case's wall budget in
    seconds and the Apple chip the agent's lints assume."""

    case_id: str
    origin: str
    files: dict[str, bytes]
    bundled: bool = False  # the case came with kport: its Python reference may run unjailed
    mode: str = "offline"
    seeds: int = 3
    timeout: float = 900.0
    chip: str = "M1"
    small: bool = False  # judge at the case's smallest size set only (quick whole-corpus runs)


def make_task(case: CaseSpec, **settings) -> CaseTask:
    """A CaseTask with ``case``'s folder packed in; KportError when the folder is too big to
    ship (over 8 MiB: a case folder holds sources and a reference, not data)."""
    files, total = {}, 0
    for path in sorted(Path(case.folder).rglob("*")):
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
            files[str(path.relative_to(case.folder))] = data = path.read_bytes()
            total += len(data)
    if total > MAX_CASE_BYTES:
        raise KportError(f"{case.folder}: {total >> 20} MiB in the case folder; keep a case "
                         "to its sources and reference (data are generated from [[args]])")
    return CaseTask(case.id, str(case.folder), files, bundled=case.bundled, **settings)


@contextlib.contextmanager
def _budget(seconds: float):
    """Raise CaseBudgetSpent in this (main) thread after ``seconds``; where signals cannot be
    set (not the main thread) only the harness's per-run timeouts bound the case. Python drops
    an exception raised where it cannot propagate (an at-fork hook, a finalizer), so the alarm
    repeats until one does, and a budget spent is reported even if the work then finished."""
    spent = []

    def alarm(signum, frame):
        spent.append(True)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        raise CaseBudgetSpent()

    try:
        previous = signal.signal(signal.SIGALRM, alarm)
    except ValueError:
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if spent:
        raise CaseBudgetSpent()


def run_case(task: CaseTask) -> dict:
    """Port and judge one case; returns its results.jsonl record (RESULT_FIELDS). Raises
    RuntimeError when the harness or the oracle breaks (a bug of ours, not a verdict)."""
    start = time.monotonic()
    with temp_folder("kport-eval-") as tmp:
        folder = Path(tmp) / task.case_id
        for rel, data in task.files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(data)
        case = load_case(folder)
        case._bundled = task.bundled  # the copy is of the case the parent loaded
        if task.small:
            case = smallest_sizes(case)
        rec = {"case": case.id, "category": case.category, "mode": task.mode,
               "compiled": False, "correct": False, "reasons": [], "todos": None,
               "coverage": None, "iterations": 0, "wall_s": 0.0, "llm_tokens": 0,
               "speedup": None, "runs": 0, "notes": []}
        try:
            with _budget(task.timeout):
                (_offline if task.mode == "offline" else _llm)(case, task, rec)
        except CaseBudgetSpent:
            rec["correct"] = False
            rec["reasons"].append(f"case budget of {task.timeout:g} s spent (--timeout)")
        except CaseError as err:  # the case's own code failed (its oracle): a record, no port
            rec["correct"] = False
            rec["reasons"].append(f"the case is broken: {err}")
        rec["wall_s"] = round(time.monotonic() - start, 3)
        return {k: rec[k] for k in RESULT_FIELDS}


def smallest_sizes(case: CaseSpec) -> CaseSpec:
    """``case`` with only its size set of fewest elements (``--small``)."""
    def elements(sizes: dict) -> int:
        return sum(int(evaluate(d, sizes)) if d else 1 for a in case.args
                   for d in (a.shape or [0]))

    small = min(case.size_sets(), key=elements)
    return case.model_copy(update={"sizes": small, "variants": []})


def _judge(case: CaseSpec, cand: Candidate, task: CaseTask, rec: dict) -> None:
    """Judge ``cand`` (its body, header and own launch) into ``rec``."""
    per_run = min(120.0, task.timeout)
    v = judge(case, cand.body, cand.header, seeds=task.seeds, timeout=per_run,
              launch=cand.launch())
    rec["runs"] = len(v.runs)
    rec["compiled"] = bool(v.runs) and not any(r["why"].startswith("did not compile")
                                               for r in v.runs)
    rec["correct"] = v.accepted
    rec["reasons"] += v.reasons


def _offline(case: CaseSpec, task: CaseTask, rec: dict) -> None:
    src = (case.folder / case.cuda.source).read_text()
    try:
        tr = translate_kernel(src, case.cuda.kernel, roles={a.name: a.role for a in case.args},
                              grid=case.cuda.grid, block=case.cuda.block,
                              shared_mem=case.cuda.shared_mem,
                              where=f"{task.origin}/{case.cuda.source}")
    except KportError as err:  # a construct the translator refuses: a failed port
        rec["reasons"].append(f"not translated: {err}")
        return
    rec["iterations"], rec["todos"], rec["coverage"] = 1, len(tr.todos), round(tr.coverage, 4)
    cand = Candidate.from_translation(tr, "translator")
    _judge(case, cand, task, rec)
    tried: set[str] = set()
    while not rec["correct"]:  # the mechanical repairs `kport port --offline` applies
        fixed = mechanical_repair(cand, case, diagnosis_ids(rec["reasons"], []), tried)
        if fixed is None:
            break
        cand, rid = fixed
        tried.add(rid)
        rec["iterations"] += 1
        rec["reasons"] = []
        rec["notes"].append(f"repaired: {cand.origin}")
        _judge(case, cand, task, rec)
    if rec["correct"]:
        rec["speedup"] = _speedup(case, cand, task.chip, rec)


def _speedup(case: CaseSpec, cand: Candidate, chip: str, rec: dict) -> float | None:
    """Candidate vs the case's expert port timed on this Mac; None off Apple Silicon."""
    if not runners.get("mlx_metal").available():
        return None

    try:
        timing = measure(cand, case, chip).get("timing") or {}
    except Exception as err:  # noqa: BLE001 - a timing failure leaves the verdict standing
        rec["notes"].append(f"timing failed: {type(err).__name__}: {err}"[:300])
        return None
    return timing.get("speedup")


def _llm(case: CaseSpec, task: CaseTask, rec: dict) -> None:
    """The porting agent (agent.session.run_port) within the case budget, then the harness on
    the candidate it ships."""
    # lazy: agent.session imports langgraph (~0.5 s); only --mode llm runs the agent
    from agent.session import new_thread_id, run_port

    settings = load_settings()
    llm = connect(settings)
    if llm is None:
        raise KportError("--mode llm needs KPORT_MODEL (provider:model, e.g. openai:gpt-4o) "
                         "in the worker's environment")
    # the agent gets three quarters of the budget; the harness needs the rest for its verdict
    budget = Budget(wall_s=0.75 * task.timeout)
    ctx = PortContext(case=case, src=(case.folder / case.cuda.source).read_text(),
                      kernel=case.cuda.kernel, where=f"{task.origin}/{case.cuda.source}",
                      llm=llm, budget=budget, chip=task.chip, seeds=task.seeds,
                      deadline=time.monotonic() + budget.wall_s)
    state = run_port(ctx, settings, new_thread_id(case.cuda.kernel)).values
    tr = state.get("translation") or {}
    rec["todos"] = len(tr["todos"]) if "todos" in tr else None
    rec["coverage"] = tr.get("coverage")
    rec["iterations"], rec["llm_tokens"] = int(state.get("iteration", 0)), tokens_used(state)
    cand = shipped(state)
    if cand is None:
        rec["reasons"].append(f"the agent shipped no candidate: {state.get('stop_reason')}")
        return
    _judge(case, cand, task, rec)
    if rec["correct"] and state.get("best"):
        timing = (state["best"].get("bench") or {}).get("timing") or {}
        rec["speedup"] = timing.get("speedup")
