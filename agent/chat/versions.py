"""Commands on a session's Metal versions: /diff, /show and /apply (and the file /edit hands
to $EDITOR). A version is never changed in place: an edit makes the next one."""

from __future__ import annotations

import difflib
from pathlib import Path

from agent.chat.state import add_version, candidate_of, need_kernel, split_args, version
from agent.nodes.retrieve import kernel_text
from agent.package import metal_text
from corpus.candidate import Candidate
from runners.errors import KportError

HEADER_MARK = "// ---- kport: header (helper functions; may stay empty) ----"
BODY_MARK = "// ---- kport: body (what goes into mx.fast.metal_kernel's source=) ----"


def metal_of(state, ver: dict) -> str:
    """The kernel.metal text of a version (signature, header, body)."""
    return metal_text(state["kernel"], candidate_of(ver))


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
        need_kernel(state)
        say(kernel_text(state["src"], state["kernel"]))
        return {}
    ver = version(state, pos[0] if pos else None)
    rec = state.get("checks", {}).get(str(ver["n"]))
    status = "not checked yet" if rec is None else ("correct" if rec.get("ok") else "NOT correct")
    say(f"// v{ver['n']} ({ver['origin']}; {status})")
    say(metal_of(state, ver))
    return {}


def edit_text(cand: Candidate) -> str:
    """A version as the file /edit hands to $EDITOR: header and body under marker lines."""
    return f"{HEADER_MARK}\n{cand.header.rstrip()}\n{BODY_MARK}\n{cand.body}"


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
    old = candidate_of(base)
    cand = old.model_copy(update={"body": body, "origin": "edit",
                                  "header": old.header if header is None else header})
    if (cand.body, cand.header) == (old.body, old.header):
        say(f"no change from v{base['n']}; nothing applied")
        return {}
    new, versions = add_version(state, cand, "edit")
    say(f"v{new['n']} (edit) from {pos[0]}; /diff shows the change, /check checks it")
    return {"versions": versions}
