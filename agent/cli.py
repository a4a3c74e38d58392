"""`kport` — the one thin dispatcher. Each package lists its verbs in VERBS; a verb is a module
with ``main(argv) -> int``, imported only when used so `kport --help` stays fast."""

from __future__ import annotations

import importlib
import os
import sys

PACKAGES = ("agent", "kb", "runners", "evals")


def verbs() -> dict[str, tuple[str, str]]:
    """All verbs: name -> (module, help), from every package's VERBS table."""
    table: dict[str, tuple[str, str]] = {}
    for package in PACKAGES:
        table.update(importlib.import_module(package).VERBS)
    return dict(sorted(table.items()))


def _usage(table: dict[str, tuple[str, str]]) -> str:
    width = max(len(name) for name in table)
    lines = [
        "usage: kport VERB [ARGS]...",
        "",
        "Port CUDA GPU kernels to Apple Metal for MLX.",
        "",
        "verbs:",
    ]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in table.items()]
    lines += ["", "`kport VERB --help` describes one verb. State lives under $KPORT_HOME.",
              "--unsandboxed (any verb, = KPORT_UNSANDBOXED=1): where the OS gives no jail, run",
              "outside code anyway, unprotected; `kport doctor` shows the isolation in force."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run one verb; returns its exit code (2 for usage errors and errors meant for people)."""
    from runners.errors import KportError

    argv = sys.argv[1:] if argv is None else argv
    if "--unsandboxed" in argv:  # a flag of every verb that runs outside code, read here once
        argv = [a for a in argv if a != "--unsandboxed"]
        os.environ["KPORT_UNSANDBOXED"] = "1"
    table = verbs()
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage(table))
        return 0 if argv else 2
    if argv[0] not in table:
        print(f"kport: unknown verb {argv[0]!r}; one of: {', '.join(table)}", file=sys.stderr)
        return 2
    module = importlib.import_module(table[argv[0]][0])
    try:
        return int(module.main(argv[1:]) or 0)
    except KportError as err:
        print(f"kport {argv[0]}: error: {err}", file=sys.stderr)
        return 2
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)


if __name__ == "__main__":
    sys.exit(main())
