"""`kport chat`: an interactive porting session in the terminal.

    kport chat [FILE.cu] [--kernel NAME] [--case DIR]   # a new session (loads FILE if given)
    kport chat --resume ID|last                          # continue a session
    kport chat --list                                    # the sessions on this machine

Slash commands need no model (/help lists them); anything else goes to the model configured
by KPORT_MODEL, streamed as it arrives. Every turn is checkpointed in
$KPORT_HOME/sessions/chat-sessions.sqlite; writing the package asks first (--yes answers yes).
"""

from __future__ import annotations

import atexit
import os
import shlex
import subprocess
import sys
import traceback
from pathlib import Path

import typer

from agent.chat.state import ChatContext, candidate_of
from agent.chat.store import hold, open_sessions, session_dir
from agent.chat.versions import edit_text
from agent.llm import connect
from kb.lints import resolve_family
from runners.errors import KportError
from runners.settings import load_settings

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


class Terminal:
    """The session's terminal side: runs lines through the chat graph, prints the stream as it
    comes, asks the approval questions, and records turns in the session index."""

    def __init__(self, graph, index, ctx, *, assume_yes: bool):
        self.graph, self.index, self.ctx, self.assume_yes = graph, index, ctx, assume_yes
        self.config = {"configurable": {"thread_id": ctx.session}, "recursion_limit": 10}
        self.tty = sys.stdin.isatty()

    def values(self) -> dict:
        return dict(self.graph.get_state(self.config).values)

    def prompt(self) -> str:
        values = self.values()
        if not values.get("kernel"):
            return "kport> "
        return f"kport[{values['kernel'].split('<')[0]} v{len(values.get('versions', []))}]> "

    def read(self, prompt: str) -> str | None:
        """A line from the user (None at end of input); echoed when stdin is not a terminal,
        so logs of scripted sessions read like the screen."""
        try:
            line = input(prompt)
        except EOFError:
            return None
        if not self.tty:
            print(line, flush=True)
        return line

    def _stream(self, start) -> None:
        for chunk in self.graph.stream(start, self.config, context=self.ctx,
                                       stream_mode="custom", durability="sync"):
            sys.stdout.write(str(chunk))
            sys.stdout.flush()

    def run(self, start, line: str) -> bool:
        """Run one turn (``start``: its input, or None to run a cut-off turn again) and answer
        the questions it asks; False when input ended at a question (it stays pending)."""
        # lazy: langgraph (~0.5 s); `kport chat --help` and --list do without it
        from langgraph.types import Command

        try:
            self._stream(start)
            while (snap := self.graph.get_state(self.config)).interrupts:
                ask = snap.interrupts[0].value["question"]
                if self.assume_yes:
                    print(f"{ask} [y/N] yes (--yes)", flush=True)
                    answer = "yes"
                else:
                    answer = self.read(f"{ask} [y/N] ")
                    if answer is None:
                        print(f"\n(the question is still open: `kport chat --resume "
                              f"{self.ctx.session}` asks it again)")
                        return False
                self._stream(Command(resume=answer))
        except KeyboardInterrupt:
            self._close(line, "(stopped)")
            print(f"\nstopped: {line!r} did not finish")
        except Exception as err:  # noqa: BLE001 - a bug must not end the session with a traceback
            log = self._log_error(line)
            self._close(line, f"(failed: {type(err).__name__})")
            print(f"\nerror: {line!r} failed inside kport ({type(err).__name__}: "
                  f"{str(err)[:200]}); this is a bug: the traceback is in {log}. The session "
                  "is saved.")
        values = self.values()
        self.index.record_turn(self.ctx.session, file=values.get("file"),
                               kernel=values.get("kernel"), last=line)
        return True

    def _close(self, line: str, note: str) -> None:
        """Mark an unfinished turn as over, so the next line starts afresh instead of
        running it again."""
        self.graph.update_state(self.config, {"pending_write": None, "transcript": [
            {"role": "user", "text": line}, {"role": "kport", "text": note}]},
            as_node="approve")

    def _log_error(self, line: str) -> Path:
        log = session_dir(self.ctx.settings, self.ctx.session) / "errors.log"
        with log.open("a") as fh:
            fh.write(f"--- {line}\n{traceback.format_exc()}\n")
        return log

    def edit(self) -> bool:
        """/edit: the current version into a file, $VISUAL/$EDITOR on it, then /apply."""
        values = self.values()
        if not values.get("versions"):
            print("error: no kernel loaded yet: /load FILE.cu [KERNEL] first")
            return True
        ver = values["versions"][-1]
        path = session_dir(self.ctx.settings, self.ctx.session) / f"edit-v{ver['n']}.metal"
        path.write_text(edit_text(candidate_of(ver)))
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        try:
            done = subprocess.run([*shlex.split(editor), str(path)])
        except OSError as err:
            print(f"error: cannot start the editor {editor!r} ({err}); set EDITOR, or edit "
                  f"{path} yourself and /apply it")
            return True
        if done.returncode != 0:
            print(f"the editor exited with {done.returncode}; nothing applied ({path} is kept)")
            return True
        return self.run({"line": f"/apply {shlex.quote(str(path))}"}, "/edit")

    def resume_notes(self) -> bool:
        """Show where a resumed session stands and finish what a crash left open."""
        # lazy: agent.session imports langgraph (~0.5 s); only a resumed session needs it
        from agent.session import unfinished

        snap = self.graph.get_state(self.config)
        values = dict(snap.values)
        if values.get("kernel"):
            n = len(values.get("versions", []))
            port = values.get("port") or {}
            print(f"  {values['kernel']} from {values.get('file')}; {n} version(s)"
                  + (f"; last /port: {'accepted' if port.get('accepted') else 'not accepted'}"
                     if port else ""))
        for entry in (values.get("transcript") or [])[-2:]:
            who = "you" if entry["role"] == "user" else "kport"
            text = entry["text"].strip().splitlines()
            print(f"  [{who}] {text[0][:100] if text else ''}"
                  + (f" (+{len(text) - 1} lines)" if len(text) > 1 else ""))
        if snap.interrupts:
            print("  a question was open when the session stopped:")
            return self.run(None, values.get("line", ""))
        if unfinished(snap):
            line = values.get("line", "")
            if snap.next:
                print(f"  the last command was cut off: {line!r}; running it again")
            else:  # it finished; only its checkpoint was not written
                print(f"  keeping the result of the last command, {line!r}")
            return self.run(None, line)
        return True

    def loop(self) -> None:
        while True:
            try:
                line = self.read(self.prompt())
            except KeyboardInterrupt:
                print("\n(/quit leaves; the session is saved)")
                continue
            if line is None:
                print()
                break
            line = line.strip()
            if not line:
                continue
            if line.lower() in ("/quit", "/exit", "/q"):
                break
            ok = self.edit() if line.lower() == "/edit" else self.run({"line": line}, line)
            if not ok:
                return
        print(f"session {self.ctx.session} saved; `kport chat --resume {self.ctx.session}` "
              "continues it")


def _history(settings) -> None:
    try:
        # lazy: importing it hooks input() for line editing, which only a terminal wants
        import readline
    except ImportError:  # not every Python has it; input() still works
        return
    path = Path(settings.sessions_dir) / "chat-history"
    try:
        readline.read_history_file(path)
    except OSError:
        pass

    atexit.register(lambda: _save_history(readline, path))


def _save_history(readline, path: Path) -> None:
    try:
        readline.set_history_length(1000)
        readline.write_history_file(path)
    except OSError:
        pass


@app.command()
def chat(file: Path = typer.Argument(None, help="a CUDA source to load (.cu / .cuh)"),
         kernel: str = typer.Option(None, help="which kernel of FILE (when it has several)"),
         case: Path = typer.Option(None, help="a case folder (case.toml) for FILE's kernel"),
         resume: str = typer.Option(None, help="continue a session: its id, or 'last'"),
         list_: bool = typer.Option(False, "--list", help="list the sessions and exit"),
         offline: bool = typer.Option(False, help="no LLM even if KPORT_MODEL is set"),
         yes: bool = typer.Option(False, "--yes", help="answer yes to every write question"),
         chip: str = typer.Option("M1", help="Apple chip the lints and roofline assume"),
         seeds: int = typer.Option(None, min=1, max=10, help="seeds per size set in checks")):
    """Port a CUDA kernel interactively (slash commands; questions go to KPORT_MODEL)."""
    resolve_family(chip)
    settings = load_settings()
    if resume and file:
        raise KportError("give a FILE for a new session or --resume ID, not both (in a "
                         "resumed session, /load FILE)")
    if (kernel or case) and file is None:
        raise KportError("--kernel and --case describe FILE: give the FILE too")
    llm = None if offline else connect(settings)
    with open_sessions(settings) as (saver, index):
        if list_:
            rows = index.rows()
            for row in rows:
                print(row.line())
            if not rows:
                print("no chat sessions yet; start one with `kport chat FILE.cu`")
            return
        sid = index.resolve(resume).id if resume else index.create()
        with hold(settings, sid):
            _session(saver, index, sid, settings, llm, offline=offline, yes=yes, chip=chip,
                     seeds=seeds, resume=bool(resume), file=file, kernel=kernel, case=case)


def _session(saver, index, sid, settings, llm, *, offline, yes, chip, seeds, resume, file,
             kernel, case) -> None:
    """Run session ``sid`` in this terminal until /quit or end of input."""
    # lazy: the chat graph imports langgraph (~0.5 s); `kport chat --help` does without it
    from agent.chat.graph import build_chat_graph

    ctx = ChatContext(settings=settings, session=sid, llm=llm, offline_flag=offline,
                      chip=chip, seeds=seeds)
    term = Terminal(build_chat_graph(saver), index, ctx, assume_yes=yes)
    mode = f"model {llm.name}" if llm else \
        "offline: commands work, questions need KPORT_MODEL"
    print(f"kport chat: session {sid} ({'resumed' if resume else 'new'}; {mode})")
    print("  /help lists the commands, /quit leaves; the session is saved after every turn")
    if sys.stdin.isatty():
        _history(settings)
    if resume and not term.resume_notes():
        return
    if file is not None:
        args = [str(file)] + ([kernel] if kernel else []) + \
            (["--case", str(case)] if case else [])
        line = "/load " + " ".join(shlex.quote(a) for a in args)
        print(line)
        if not term.run({"line": line}, line):
            return
    term.loop()


def main(argv: list[str]) -> int:
    """Entry of `kport chat`."""
    return app(args=argv, prog_name="kport chat", standalone_mode=True) or 0
