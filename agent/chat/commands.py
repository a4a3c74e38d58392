"""The slash commands of `kport chat`. Each handler takes (state, args, ctx, say) and returns
the state update; a KportError becomes a one-line ``error:`` answer (the session goes on).

None of them needs an LLM. /save only plans its write: the graph's approval step asks the user
(langgraph ``interrupt()``) before anything is written outside kport's own session folder.
"""

from __future__ import annotations

import contextvars
import difflib
import shlex
import time
from pathlib import Path

from agent.chat.state import add_version, need_kernel, version
from agent.chat.store import session_dir
from runners.errors import KportError

HEADER_MARK = "// ---- kport: header (helper functions; may stay empty) ----"
BODY_MARK = "// ---- kport: body (what goes into mx.fast.metal_kernel's source=) ----"


def split_args(args: list[str], usage: str, flags: dict[str, bool]) -> tuple[list[str], dict]:
    """(positionals, options) of a command's arguments; ``flags`` maps each option to whether
    it takes a value. KportError naming the option and the usage otherwise."""
    pos, opts, i = [], {}, 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            if arg not in flags:
                raise KportError(f"unknown option {arg}; usage: {usage}")
            if flags[arg]:
                if i + 1 >= len(args):
                    raise KportError(f"{arg} needs a value; usage: {usage}")
                opts[arg] = args[i + 1]
                i += 1
            else:
                opts[arg] = True
        else:
            pos.append(arg)
        i += 1
    return pos, opts


def load_case_of(state):
    """The CaseSpec checks of this session run against."""
    from evals.cases import load_case

    need_kernel(state)
    return load_case(Path(state["case_dir"]))


def _find_case(file: Path, kernel: str, case_opt: str | None, settings, sid: str):
    """(case, how it was found, what was guessed) for ``kernel`` of ``file``."""
    from agent.case_guess import guess_case
    from agent.package import python_name
    from evals.cases import load_case

    if case_opt:
        folder = Path(case_opt).expanduser()
        case = load_case(folder.parent if folder.name == "case.toml" else folder)
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
    return case, f"guessed case {folder / 'case.toml'} (check it; /load with --case DIR)", \
        guessed


def cmd_load(state, args, ctx, say) -> dict:
    """/load FILE [KERNEL] [--case DIR]: read a CUDA source, pick the kernel, find or guess
    its case, and draft v1 with the offline translator."""
    from agent.translate import translate_kernel
    from agent.translate_cli import translation_json
    from kb.parse import functions
    from kb.rules_match import kernel_tokens, match_rules

    usage = "/load FILE.cu [KERNEL] [--case DIR]"
    pos, opts = split_args(args, usage, {"--case": True})
    if not pos or len(pos) > 2:
        raise KportError(f"usage: {usage}")
    file = Path(pos[0]).expanduser().resolve()
    try:
        src = file.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise KportError(f"{pos[0]}: cannot read ({err})") from None
    kernels = [f.name for f in functions(src, "cuda") if f.kind == "kernel"]
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
    tr = translate_kernel(src, kernel, roles={a.name: a.role for a in case.args},
                          grid=case.cuda.grid, block=case.cuda.block,
                          shared_mem=case.cuda.shared_mem, where=str(file))
    trj = translation_json(tr)
    hits = match_rules(kernel_tokens(src, kernel, str(file)))
    rules = [{"rule_id": h.rule_id, "title": h.title, "metal": h.metal, "lines": h.lines,
              "pitfalls": h.pitfalls[:2], "unconfirmed": h.unconfirmed} for h in hits]
    from agent.state import candidate_from

    v1 = {"n": 1, "origin": "translator", "candidate": candidate_from(trj, "translator")}
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
        cand = update.get("candidate")
        if cand:
            return f"{node}: candidate from {cand.get('origin', '?')}"
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
    from agent.report import shipped
    from agent.session import run_port
    from agent.state import Budget, PortContext

    _, opts = split_args(args, "/port [--no-kb]", {"--no-kb": False})
    case = load_case_of(state)
    budget = Budget()
    pctx = PortContext(case=case, src=state["src"], kernel=state["kernel_spec"],
                       where=state["file"],
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
        new, versions = add_version(state, dict(cand), f"port:{cand.get('origin', '?')}")
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
    from agent.nodes.check import run_check

    pos, opts = split_args(args, "/check [VERSION] [--strict]", {"--strict": False})
    ver = version(state, pos[0] if pos else None)
    case = load_case_of(state)
    cand = ver["candidate"]
    if "--strict" in opts:
        from evals.harness import judge

        say(f"judging v{ver['n']} in the hardened harness (child process, static checks, "
            "every size set, 3 seeds, a repeat run)")
        verdict = judge(case, cand["body"], cand.get("header", ""), launch=cand)
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
    from agent.nodes.bench import measure

    pos, _ = split_args(args, "/bench [VERSION]", {})
    ver = version(state, pos[0] if pos else None)
    rec = measure(ver["candidate"], load_case_of(state), ctx.chip)
    say(f"v{ver['n']} on {ctx.chip}: {rec['note']}")
    if rec.get("timing"):
        say(f"  median {rec['timing']['median_s'] * 1e6:.1f} us")
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


def metal_of(state, ver: dict) -> str:
    """The kernel.metal text of a version (signature, header, body)."""
    from agent.package import metal_text

    return metal_text(state["kernel"], ver["candidate"])


def cmd_diff(state, args, ctx, say) -> dict:
    """/diff [A [B]]: unified diff of two versions' Metal (default: the last two)."""
    pos, _ = split_args(args, "/diff [A [B]]", {})
    need_kernel(state)
    n = len(state.get("versions") or [])
    if len(pos) > 2:
        raise KportError("usage: /diff [A [B]]")
    if not pos and n < 2:
        raise KportError("only v1 exists; /port, /apply or /edit make another version")
    a = version(state, pos[0] if pos else n - 1)
    b = version(state, pos[1] if len(pos) > 1 else n)
    lines = list(difflib.unified_diff(metal_of(state, a).splitlines(),
                                      metal_of(state, b).splitlines(),
                                      f"v{a['n']} ({a['origin']})",
                                      f"v{b['n']} ({b['origin']})", lineterm=""))
    if not lines:
        say(f"v{a['n']} and v{b['n']} are the same")
    for line in lines:
        say(line)
    return {}


def cmd_show(state, args, ctx, say) -> dict:
    """/show [VERSION | cuda]: a version's Metal (default the current one), or the CUDA
    kernel."""
    pos, _ = split_args(args, "/show [VERSION | cuda]", {})
    if pos and pos[0] == "cuda":
        from agent.nodes.retrieve import _kernel_text

        need_kernel(state)
        say(_kernel_text(state["src"], state["kernel"]))
        return {}
    ver = version(state, pos[0] if pos else None)
    rec = state.get("checks", {}).get(str(ver["n"]))
    status = "not checked yet" if rec is None else ("correct" if rec.get("ok") else "NOT correct")
    say(f"// v{ver['n']} ({ver['origin']}; {status})")
    say(metal_of(state, ver))
    return {}


def edit_text(cand: dict) -> str:
    """A version as the file /edit hands to $EDITOR: header and body under marker lines."""
    return f"{HEADER_MARK}\n{cand.get('header', '').rstrip()}\n{BODY_MARK}\n{cand['body']}"


def parse_edit(text: str, where: str) -> tuple[str | None, str]:
    """(header or None, body) of an edited file: the parts under the marker lines, or the
    whole file as the body when it has no markers."""
    if BODY_MARK not in text:
        if "[[kernel]]" in text:
            raise KportError(f"{where}: give only the kernel body (what MLX's source= takes), "
                             "not a whole [[kernel]] function")
        return None, text
    head, _, body = text.partition(BODY_MARK)
    header = head.split(HEADER_MARK, 1)[1] if HEADER_MARK in head else head
    return header.strip("\n"), body.strip("\n") + "\n"


def cmd_apply(state, args, ctx, say) -> dict:
    """/apply FILE: a new version from an edited body (and header) in FILE; the launch stays.
    (/edit writes such a file, opens $EDITOR on it and applies it.)"""
    pos, _ = split_args(args, "/apply FILE", {})
    if len(pos) != 1:
        raise KportError("usage: /apply FILE (a kernel body, or a file /edit wrote)")
    base = version(state)
    try:
        text = Path(pos[0]).expanduser().read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise KportError(f"{pos[0]}: cannot read ({err})") from None
    header, body = parse_edit(text, pos[0])
    if not body.strip():
        raise KportError(f"{pos[0]}: the body is empty; nothing applied")
    cand = {**base["candidate"], "body": body, "origin": "edit"}
    if header is not None:
        cand["header"] = header
    if cand["body"] == base["candidate"]["body"] and \
            cand.get("header", "") == base["candidate"].get("header", ""):
        say(f"no change from v{base['n']}; nothing applied")
        return {}
    new, versions = add_version(state, cand, "edit")
    say(f"v{new['n']} (edit) from {pos[0]}; /diff shows the change, /check checks it")
    return {"versions": versions}


def cmd_rules(state, args, ctx, say) -> dict:
    """/rules [RULE_ID]: the concept rules that apply to the loaded kernel, or one rule."""
    from kb.concepts import load_rules

    pos, _ = split_args(args, "/rules [RULE_ID]", {})
    if pos:
        rule = next((r for r in load_rules() if r.id == pos[0]), None)
        if rule is None:
            near = [r.id for r in load_rules() if pos[0] in r.id][:6]
            raise KportError(f"no rule {pos[0]!r}" + (f"; similar: {', '.join(near)}"
                                                      if near else "; /rules lists them"))
        say(f"{rule.id} [{rule.group}] {rule.title}" + ("  (UNCONFIRMED)"
                                                         if rule.unconfirmed else ""))
        say(f"  CUDA:  {', '.join(rule.cuda)}")
        say(f"  Metal: {rule.metal}")
        if rule.notes:
            say(f"  notes: {rule.notes}")
        for p in rule.pitfalls:
            say(f"  pitfall: {p}")
        if rule.source:
            say(f"  source: {rule.source}")
        return {}
    need_kernel(state)
    rules = state.get("rules", [])
    say(f"{len(rules)} concept rule(s) apply to {state['kernel']}:")
    for r in rules:
        mark = " (UNCONFIRMED)" if r.get("unconfirmed") else ""
        lines = ",".join(map(str, r["lines"][:6]))
        say(f"  {r['rule_id']:<34} lines {lines:<12} -> {r['metal'][:90]}{mark}")
    say("  /rules RULE_ID shows one in full (pitfalls, source)")
    return {}


def cmd_analogues(state, args, ctx, say) -> dict:
    """/analogues: CUDA/Metal pairs already ported that are most like the loaded kernel (from
    the knowledge base; the kernel's own corpus pair is left out)."""
    from types import SimpleNamespace

    from agent.nodes.retrieve import _kernel_text, analogues

    split_args(args, "/analogues", {})
    case = load_case_of(state)
    pairs, note = analogues(SimpleNamespace(use_kb=True, case=case),
                            _kernel_text(state["src"], state["kernel"]))
    say(note)
    for p in pairs:
        say(f"  {p['title']}  (case {p.get('case') or '-'}, score {p['score']:.4f}, "
            f"id {p['id']})")
        for line in p["metal"].strip().splitlines()[:6]:
            say(f"      {line}")
    if not pairs and "no retrieval" in note:
        say("  build the knowledge base first: `kport kb build` (see docs/kb.md)")
    return {"analogues": [{k: p[k] for k in ("id", "title", "case", "score")} for p in pairs]}


def cmd_save(state, args, ctx, say) -> dict:
    """/save [DIR] [--version N]: write the output package of a version (default the
    current one) into DIR (default ./port-KERNEL): kernel.py, kernel.metal, report, test,
    oracle. Asks before writing."""
    from agent.nodes.check import run_check
    from agent.package import python_name

    pos, opts = split_args(args, "/save [DIR] [--version N]", {"--version": True})
    ver = version(state, opts.get("--version"))
    default = Path.cwd() / f"port-{python_name(state['kernel'])}"
    folder = (Path(pos[0]).expanduser() if pos else default).resolve()
    if folder.exists() and not folder.is_dir():
        raise KportError(f"{folder} is a file; /save needs a folder")
    update = {}
    key = str(ver["n"])
    say(f"saving v{ver['n']} ({ver['origin']}) to {folder}")
    if key not in state.get("checks", {}):
        say(f"v{ver['n']} was never checked; checking it first (the report says what holds)")
        rec = run_check(load_case_of(state), ver["candidate"], ctx.seeds)
        say(check_summary(ver["n"], rec))
        update["checks"] = {**state.get("checks", {}), key: rec}
    files = ["kernel.py", "kernel.metal", "test_kernel.py", "oracle.json", "oracle_*.npz",
             "report.md", "report.json"]
    if "guessed" in state.get("case_origin", ""):
        files.append("case.toml (+ the CUDA source)")
    present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    return {**update, "pending_write": {"dir": str(folder), "version": ver["n"], "files": files,
                                        "replaces": [n for n in present if n in files
                                                     or n.startswith("oracle_")]}}


def cmd_sessions(state, args, ctx, say) -> dict:
    """/sessions: the chat sessions on this machine (resume one with `kport chat --resume
    ID`)."""
    from agent.chat.store import open_sessions

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
            "analogues": cmd_analogues, "save": cmd_save, "sessions": cmd_sessions,
            "help": cmd_help}
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
    ("/save [DIR] [--version N]", "write the output package (asks first)"),
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
