"""A chat session's checkpointed state (plain JSON-like values), its run context (not
checkpointed) and the output of one turn.

The session keeps every Metal draft as a numbered *version* (v1 is the translator's; /port,
/apply and model answers add more); /check and /bench records are kept per version.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from corpus.candidate import Candidate
from corpus.cases import load_case
from runners.errors import KportError

TRANSCRIPT_CHARS = 4000  # of one turn's output kept in the transcript


class ChatState(TypedDict, total=False):
    """Everything a session remembers between turns and across restarts."""

    session: str
    line: str  # the command of the current turn
    turn: int
    file: str | None  # the CUDA source loaded (as given)
    kernel: str | None  # its name (what packages and prompts use)
    kernel_spec: str | None  # with template arguments, e.g. softmax<256> (what is translated)
    src: str | None  # its text when loaded: later edits of the file do not change the session
    case_dir: str | None  # the case checks run against: the user's, a corpus case, or guessed
    case_origin: str  # how the case was found
    guessed: list[str]  # what was guessed about the case
    translation: dict | None  # agent.translate_cli.translation_json of the loaded kernel
    rules: list[dict]  # concept rules matched in the kernel
    versions: list[dict]  # {"n", "origin", "candidate"}
    checks: dict  # "n" -> agent.nodes.check record
    benches: dict  # "n" -> agent.nodes.bench record
    ports: int  # /port runs so far (each has its own checkpoint thread)
    port: dict | None  # the last /port: thread, accepted, stop_reason, version, mode
    analogues: list[dict]
    llm_tokens: int
    llm_tokens_estimated: bool  # a provider gave no usage: ~4 characters a token
    pending_write: dict | None  # a write waiting for approval: dir, version, files
    transcript: Annotated[list[dict], operator.add]  # {"role": "user" | "kport", "text"}


@dataclass(frozen=True)
class ChatContext:
    """What a turn may use and nothing checkpoints: settings, the session id, the LLM (None
    offline), whether offline was asked for, and the chip and seeds checks assume."""

    settings: Any
    session: str
    llm: Any = None
    offline_flag: bool = False
    chip: str = "M1"
    seeds: int | None = None


class Say:
    """The output of one turn: each piece goes to ``write`` (the stream) as it is produced and
    is kept for the transcript."""

    def __init__(self, write):
        self.write, self.parts = write, []

    def __call__(self, text: str = "", end: str = "\n") -> None:
        piece = text + end
        self.parts.append(piece)
        self.write(piece)

    def text(self) -> str:
        text = "".join(self.parts)
        return text if len(text) <= TRANSCRIPT_CHARS else text[:TRANSCRIPT_CHARS] + "\n[...]\n"


def need_kernel(state: ChatState) -> None:
    """KportError unless a kernel is loaded."""
    if not state.get("kernel"):
        raise KportError("no kernel loaded yet: /load FILE.cu [KERNEL] first")


def version(state: ChatState, ref: str | int | None = None) -> dict:
    """Version ``ref`` (a number, ``v3``, or None for the current one); KportError if none."""
    need_kernel(state)
    versions = state.get("versions") or []
    if not versions:
        raise KportError("no Metal draft yet: /load the kernel again")
    if ref is None:
        return versions[-1]
    text = str(ref).lstrip("vV")
    if not text.isdigit() or not 1 <= int(text) <= len(versions):
        raise KportError(f"no version {ref!r}: there are v1..v{len(versions)}")
    return versions[int(text) - 1]


def add_version(state: ChatState, candidate: Candidate,
                origin: str) -> tuple[dict, list[dict]]:
    """(the new version, the new versions list) for ``candidate`` (kept as its model_dump)."""
    versions = list(state.get("versions") or [])
    new = {"n": len(versions) + 1, "origin": origin, "candidate": candidate.model_dump()}
    return new, versions + [new]


def candidate_of(ver: dict) -> Candidate:
    """The candidate of a record that holds one (a version, a porting step's update)."""
    return Candidate.model_validate(ver["candidate"])


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
    need_kernel(state)
    return load_case(Path(state["case_dir"]))
