"""The slash commands of `kport chat` and their dispatch. Each handler takes (state, args, ctx,
say) and returns the state update; a KportError becomes a one-line ``error:`` answer (the
session goes on). This module has the porting workflow (/load, /port, /check, /bench, /save);
agent/chat/versions.py the version views and edits, agent/chat/knowledge.py the knowledge.

None of them needs an LLM. /save only plans its write: the graph's approval step asks the user
(langgraph ``interrupt()``) before anything is written outside kport's own session folder.
"""

from __future__ import annotations

import contextvars
import shlex
import time
from pathlib import Path

from agent.case_guess import guess_case, load_case_arg
from agent.chat.knowledge import cmd_analogues, cmd_rules, cmd_search
from agent.chat.state import add_version, candidate_of, load_case_of, split_args, version
from agent.chat.store import open_sessions, session_dir
from agent.chat.versions import cmd_apply, cmd_diff, cmd_show
from agent.cuda_source import read_cuda
from agent.harness import judge
from agent.nodes.analyze import translate_for_case
from agent.nodes.bench import measure
from agent.nodes.check import run_check
from agent.nodes.retrieve import rule_records
from agent.out_folder import check_out_folder
from agent.package import LAYOUT, python_name
from agent.report import shipped
from agent.state import Budget, PortContext
from agent.translate import cuda_closure
from agent.translate_cli import translation_json
from corpus.candidate import Candidate
from corpus.cases import load_case
from kb.parse import functions
from runners.cuda_sim.reading import line_origins
from runners.errors import KportError


def _find_case(file: Path, kernel: str, case_opt: str | None, settings, sid: str):
    """(case, how it was found, what was guessed) for ``kernel`` of ``file``."""
    if case_opt:  # a case folder, its case.toml, or a package's case.guessed.toml
        case = load_case_arg(Path(case_opt), session_dir(settings, sid) / "case-arg")
        if case.cuda.kernel.split("<")[0] != kernel.split("<")[0]:
            raise KportError(f"--case {case_opt}: that case ports {case.cuda.kernel!r}, not "
                             f"{kernel!r}")
        return case, f"case {case.id} (--case)", []
    beside = file.parent / "case.toml"
    if beside.is_file():
        case = load_case(file.parent)
        if case.cuda.source == file.name and \
                case.cuda.kernel.split("<")[0] == kernel.split("<")[0]:
            return case, f"case {case.id} (the case.toml beside the file)", []
    folder = session_dir(settings, sid) / "case" / python_name(kernel)
    case, guessed = guess_case(file, kernel, folder, sizes={})
    return case, f"guessed case {folder / 'case.toml'} (check it; /load with --case FILE)", \
        guessed


def cmd_load(state, args, ctx, say) -> dict:
    """/load FILE [KERNEL] [--case DIR]: read a CUDA source, pick the kernel, find or guess
    its case, and draft v1 with the offline translator."""
    usage = "/load FILE.cu [KERNEL] [--case DIR]"
    pos, opts = split_args(args, usage, {"--case": True})
    if not pos or len(pos) > 2:
        raise KportError(f"usage: {usage}")
    file = Path(pos[0]).expanduser().resolve()
    view = read_cuda(file)  # as nvcc reads it in its folder (agent/cuda_source.py)
    kernels = [f.name for f in functions(view.text, "cuda") if f.kind == "kernel"]
    if not kernels:
        raise KportError(f"{pos[0]}: no __global__ kernel found in it")
    if len(pos) == 2:
        kernel = pos[1]
        if kernel.split("<")[0] not in kernels:
            raise KportError(f"{pos[0]} has no kernel {kernel!r}; it has: {', '.join(kernels)}")
    elif len(kernels) == 1:
        kernel = kernels[0]
    else:
        raise KportError(f"{pos[0]} has {len(kernels)} kernels: {', '.join(kernels)}; say "
                         f"which: /load {pos[0]} NAME")
    case, how, guessed = _find_case(file, kernel, opts.get("--case"), ctx.settings,
                                    ctx.session)
    kernel = case.cuda.kernel if case.cuda.kernel.split("<")[0] == kernel else kernel
    src = cuda_closure(view.text, kernel, where=file.name, origin=view.origin)
    tr = translate_for_case(src, kernel, case, str(file), line_origins(src, file.name))
    trj = translation_json(tr)
    rules = rule_records(src, kernel, str(file))
    v1 = {"n": 1, "origin": "translator",
          "candidate": Candidate.from_translation(trj, "translator").model_dump()}
    say(f"loaded {tr.kernel} from {file}")
    say(f"  checks run against {how}")
    for line in guessed:
        say(f"  guessed: {line}")
    todos = len(trj.get("todos", []))
    say(f"  v1 (offline translator): {trj['coverage']:.0%} of constructs mapped, {todos} "
        f"KPORT-TODO(s); {len(rules)} concept rule(s) apply (/rules)")
    say("  next: /port to check and improve it, /show to read it, /check to check v1 as is")
    return {"file": str(file), "kernel": tr.kernel, "kernel_spec": kernel, "src": src,
            "case_dir": str(case.folder),
            "case_origin": how, "guessed": guessed, "translation": trj, "rules": rules,
            "versions": [v1], "checks": {}, "benches": {}, "port": None, "analogues": []}


_STEP_WORDS = {"analyze": "parsed the kernel, translator draft ready",
               "benchmark": "measured (simulator metrics and lints off a Mac)"}


def describe_step(node: str, update: dict) -> str | None:
    """One progress line for a step of the porting graph (None: nothing worth saying)."""
    if node == "retrieve":
        return f"retrieve: {len(update.get('rules', []))} rule(s); {update.get('kb_note', '')}"
    if node in ("draft", "optimise"):
        if update.get("candidate"):
            return f"{node}: candidate from {candidate_of(update).origin or '?'}"
        return f"{node}: {update.get('stop_reason') or 'nothing new'}"
    if node == "check":
        attempt = (update.get("attempts") or [{}])[0]
        feedback = "; ".join(attempt.get("feedback", [])[:1])
        return (f"check #{update.get('iteration')}: {attempt.get('summary', '?')}"
                + (f" ({feedback[:160]})" if feedback else ""))
    if node == "decide":
        return f"decide: {update.get('decision', '?')}"
    if node == "finish":
        return f"finish: {update.get('stop_reason', '')}"
    return f"{node}: {_STEP_WORDS[node]}" if node in _STEP_WORDS else None


def cmd_port(state, args, ctx, say) -> dict:
    """/port [--no-kb]: run the porting agent (offline translator, or the configured LLM)
    with checks at every size set and seed; its shipped candidate becomes a new version."""
    # lazy: agent.session imports langgraph (~0.5 s); only /port runs the agent
    from agent.session import run_port

    _, opts = split_args(args, "/port [--no-kb]", {"--no-kb": False})
    case = load_case_of(state)
    budget = Budget()
    pctx = PortContext(case=case, src=state["src"], kernel=state["kernel_spec"],
                       where=state["file"],
                       origin=line_origins(state["src"], Path(state["file"]).name),
                       llm=ctx.llm, budget=budget, chip=ctx.chip, seeds=ctx.seeds,
                       use_kb="--no-kb" not in opts,
                       deadline=time.monotonic() + budget.wall_s)
    # The thread is named by the session and the run's number, so a /port cut off by a crash
    # continues its own checkpoints when the turn runs again.
    thread = f"{ctx.session}-port{state.get('ports', 0) + 1}"
    mode = f"model {ctx.llm.name}" if ctx.llm else "offline"
    say(f"porting {state['kernel']} ({mode}; checkpoint thread {thread})")

    turn_context = contextvars.copy_context()  # where this turn's stream writer works

    def step(node: str, update: dict) -> None:
        line = describe_step(node, update)
        if line:
            turn_context.run(say, f"  {line}")

    # A fresh context: the porting graph is its own graph with its own checkpoints, not a
    # subgraph of this chat turn.
    result = contextvars.Context().run(run_port, pctx, ctx.settings, thread, on_step=step)
    if result.resumed:
        say(f"  (continued thread {thread} from its last checkpoint)")
    final = result.values
    cand = shipped(final)
    update = {"ports": state.get("ports", 0) + 1}
    accepted = final.get("best") is not None
    record = {"thread": thread, "accepted": accepted, "mode": mode,
              "stop_reason": final.get("stop_reason", ""), "version": None}
    if cand is not None:
        new, versions = add_version(state, cand, f"port:{cand.origin or '?'}")
        record["version"] = new["n"]
        best = final.get("best") or {}
        key = str(new["n"])
        update.update(versions=versions,
                      checks={**state.get("checks", {}), key: best.get("check")
                              or final.get("check", {})},
                      benches={**state.get("benches", {}), key: best.get("bench") or {}})
    verdict = "ACCEPTED" if accepted else "NOT ACCEPTED"
    where = f"v{record['version']}" if record["version"] else "no version"
    say(f"port {verdict}: {record['stop_reason']} -> {where}")
    say("  /diff shows what changed, /bench measures it, /save writes the package")
    return {**update, "port": record}


def check_summary(n: int, rec: dict) -> str:
    """One line about a check record."""
    runs = rec.get("runs", [])
    if rec.get("ok"):
        found = rec.get("sanitizer", {}).get("with_findings", 0)
        return (f"v{n}: correct at every size set and seed ({len(runs)} runs; sanitizer "
                f"findings in {found})")
    failed = sum(r["metal"] != "ok" for r in runs)
    head = f"v{n}: NOT correct ({failed} of {len(runs)} runs failed)" if runs else \
        f"v{n}: NOT correct (nothing ran)"
    return head + "".join(f"\n  - {f[:300]}" for f in rec.get("feedback", [])[:4])


def cmd_check(state, args, ctx, say) -> dict:
    """/check [VERSION] [--strict]: check a version against the oracle at every size set and
    seed with the simulator's sanitizers; --strict runs the cheat-proof harness instead."""
    pos, opts = split_args(args, "/check [VERSION] [--strict]", {"--strict": False})
    ver = version(state, pos[0] if pos else None)
    case = load_case_of(state)
    cand = candidate_of(ver)
    if "--strict" in opts:
        say(f"judging v{ver['n']} in the hardened harness (child process, static checks, "
            "every size set, 3 seeds, a repeat run)")
        verdict = judge(case, cand.body, cand.header, launch=cand)
        if verdict.accepted:
            say(f"v{ver['n']}: accepted ({len(verdict.runs)} runs and a repeat run)")
        else:
            say(f"v{ver['n']}: REJECTED")
            for reason in verdict.reasons[:4]:
                say(f"  - {reason[:300]}")
        return {}
    say(f"checking v{ver['n']} ({ver['origin']}) against {case.id}")
    rec = run_check(case, cand, ctx.seeds)
    say(check_summary(ver["n"], rec))
    return {"checks": {**state.get("checks", {}), str(ver["n"]): rec}}


def cmd_bench(state, args, ctx, say) -> dict:
    """/bench [VERSION]: performance lints, launch metrics and a roofline bound (and real MLX
    timings on Apple Silicon) for a version at the case's default sizes."""
    pos, _ = split_args(args, "/bench [VERSION]", {})
    ver = version(state, pos[0] if pos else None)
    rec = measure(candidate_of(ver), load_case_of(state), ctx.chip)
    say(f"v{ver['n']} on {ctx.chip}: {rec['note']}")
    for line in (rec.get("timing") or {}).get("lines", []):  # agent/mac_timing.time_case
        say(f"  {line}")
    m = rec.get("metrics", {})
    if m:
        say(f"  grid {m['grid_threads']} threads, threadgroup {m['threadgroup']}, "
            f"{m['threadgroups']} threadgroups, {m['threadgroup_memory_bytes']} B threadgroup "
            f"memory, {m['bytes_moved']} B moved")
        if "roofline_lower_bound_s" in m:
            say(f"  roofline lower bound on {m['roofline_chip']}: "
                f"{m['roofline_lower_bound_s'] * 1e6:.2f} us")
    for lint in rec.get("lints", []):
        say(f"  {lint['severity']}: {lint['id']}: {lint['message'][:200]}")
    if not rec.get("lints"):
        say("  no performance lints")
    return {"benches": {**state.get("benches", {}), str(ver["n"]): rec}}


def cmd_save(state, args, ctx, say) -> dict:
    """/save [DIR] [--version N] [--force]: write the output package of a version (default
    the current one) into DIR (default ./port-KERNEL): kernel.py, kernel.metal, report, test,
    oracle. DIR must be new, empty or a package kport wrote (--force: write into it anyway;
    its other files are left alone). Asks before writing."""
    usage = "/save [DIR] [--version N] [--force]"
    pos, opts = split_args(args, usage, {"--version": True, "--force": False})
    if len(pos) > 1:
        raise KportError(f"usage: {usage}")
    ver = version(state, opts.get("--version"))
    default = Path.cwd() / f"port-{python_name(state['kernel'])}"
    folder = (Path(pos[0]).expanduser() if pos else default).resolve()
    check_out_folder(folder, force=bool(opts.get("--force")), flag="/save")
    update = {}
    key = str(ver["n"])
    say(f"saving v{ver['n']} ({ver['origin']}) to {folder}")
    if key not in state.get("checks", {}):
        say(f"v{ver['n']} was never checked; checking it first (the report says what holds)")
        rec = run_check(load_case_of(state), candidate_of(ver), ctx.seeds)
        say(check_summary(ver["n"], rec))
        update["checks"] = {**state.get("checks", {}), key: rec}
    files = list(LAYOUT)
    if state.get("guessed"):
        files.append("case.guessed.toml (+ the CUDA source)")
    present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    return {**update, "pending_write": {"dir": str(folder), "version": ver["n"], "files": files,
                                        "force": bool(opts.get("--force")),
                                        "replaces": [n for n in present if n in files
                                                     or n.startswith("oracle_")]}}


def cmd_sessions(state, args, ctx, say) -> dict:
    """/sessions: the chat sessions on this machine (resume one with `kport chat --resume
    ID`)."""
    split_args(args, "/sessions", {})
    with open_sessions(ctx.settings) as (_, index):
        rows = index.rows()
    for row in rows:
        say(("* " if row.id == ctx.session else "  ") + row.line())
    say("resume one with `kport chat --resume ID` (or --resume last)")
    return {}


def cmd_help(state, args, ctx, say) -> dict:
    """/help: what you can type."""
    width = max(len(u) for u, _ in COMMAND_HELP)
    say("commands (no model needed):")
    for usage, text in COMMAND_HELP:
        say(f"  {usage:<{width}}  {text}")
    say("anything else is a question or a change request for the model (KPORT_MODEL); "
        "answers cite rule ids and analogues")
    return {}


COMMANDS = {"load": cmd_load, "port": cmd_port, "check": cmd_check, "bench": cmd_bench,
            "diff": cmd_diff, "show": cmd_show, "apply": cmd_apply, "rules": cmd_rules,
            "analogues": cmd_analogues, "search": cmd_search, "save": cmd_save,
            "sessions": cmd_sessions, "help": cmd_help}


COMMAND_HELP = [
    ("/load FILE.cu [KERNEL] [--case DIR]", "load a CUDA kernel; v1 is the offline draft"),
    ("/port [--no-kb]", "run the porting agent; its result is a new version"),
    ("/check [N] [--strict]", "check a version at every size set and seed (--strict: harness)"),
    ("/bench [N]", "lints, launch metrics, roofline (timings on Apple Silicon)"),
    ("/diff [A [B]]", "diff two versions (default the last two)"),
    ("/show [N | cuda]", "print a version's Metal, or the CUDA kernel"),
    ("/edit", "edit the current version in $EDITOR (a new version)"),
    ("/apply FILE", "a new version from a body (and header) in FILE"),
    ("/rules [RULE_ID]", "concept rules that apply, or one rule in full"),
    ("/analogues", "ported kernels most like this one, from the knowledge base"),
    ("/search QUERY [--kind K]", "search the knowledge base (rules, arch, analogues, docs, fixes)"),
    ("/save [DIR] [--version N] [--force]", "write the output package (asks first)"),
    ("/sessions", "list chat sessions"),
    ("/help", "this list"),
    ("/quit", "leave (the session is saved; `kport chat --resume ID`)"),
]


def dispatch(state, line: str, ctx, say) -> dict:
    """Run one slash command line; KportError for an unknown command or bad arguments."""
    try:
        words = shlex.split(line[1:])
    except ValueError as err:
        raise KportError(f"cannot split {line!r}: {err}") from None
    if not words:
        raise KportError("an empty command; /help lists them")
    name, args = words[0].lower(), words[1:]
    if name not in COMMANDS:
        raise KportError(f"unknown command /{name}; /help lists them")
    return COMMANDS[name](state, args, ctx, say)
