"""`kport` — the one thin dispatcher. Each package lists its verbs in VERBS; a verb is a module
with ``main(argv) -> int``, imported only when used so `kport --help` stays fast."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from runners import lifetime
from runners.errors import KportError


class UsageProblem(KportError):
    """A command line click could not parse; printed as one line like every input error."""

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


# Exit codes, the same for every verb (docs/setup.md): 0 done/accepted, 1 rejected or failed,
# 2 a usage or input error (one line saying what to fix), 3 a bug in kport (one line; the
# traceback is saved to a file), 130 interrupted.
EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _run_verb(module, prog: str, args: list[str]) -> int:
    """The verb's typer app run without click's own error printing, so that a usage error
    comes back here as one line; a verb without an app runs through its main()."""
    # lazy: typer (~30 ms to import): `kport --help` lists the verbs without it
    from typer._click import exceptions as click  # typer vendors its own click
    from typer.exceptions import Abort

    app = getattr(module, "app", None)
    if app is None:
        return int(module.main(args) or 0)
    try:
        code = app(args=args, prog_name=prog, standalone_mode=False)
        if code == EXIT_INTERRUPTED:  # typer's answer to Ctrl-C
            raise KeyboardInterrupt
    except click.UsageError as err:
        where = err.ctx.command_path if err.ctx else prog
        raise UsageProblem(f"{err.format_message()} (`{where} --help` lists the options)") \
            from None
    except click.ClickException as err:
        raise UsageProblem(err.format_message()) from None
    except Abort:
        return EXIT_INTERRUPTED
    return code if isinstance(code, int) and not isinstance(code, bool) else EXIT_OK


def _save_crash(verb: str, err: BaseException) -> str:
    """Write the traceback of a kport bug to $KPORT_HOME/logs (or the temp folder when the
    settings themselves are broken); returns where."""
    try:
        # lazy: pydantic (~0.1 s), which `kport --help` must not pay
        from runners.settings import load_settings

        folder = load_settings().home / "logs"
        folder.mkdir(parents=True, exist_ok=True)
    except Exception:  # noqa: BLE001 - the crash report must not crash
        folder = Path(tempfile.gettempdir())
    path = folder / f"crash-{verb}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    try:
        path.write_text(f"kport {verb} {' '.join(sys.argv[2:])}\n\n"
                        + "".join(traceback.format_exception(err)))
    except OSError:
        return "(it could not be saved)"
    return str(path)


def main(argv: list[str] | None = None) -> int:
    """Run one verb; returns its exit code (EXIT_* above)."""
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
    verb = argv[0]
    try:
        lifetime.raise_on_termination()  # SIGTERM, SIGHUP: unwind and clean up as for Ctrl-C
        module = importlib.import_module(table[verb][0])
        return _run_verb(module, f"kport {verb}", argv[1:])
    except KportError as err:
        print(f"kport {verb}: error: {err}", file=sys.stderr)
        return EXIT_INPUT
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except KeyboardInterrupt:
        print(f"kport {verb}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `kport ... | head`: the reader left; nothing more to say
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the exit flush does not fail
        return EXIT_FAILED
    except Exception as err:  # noqa: BLE001 - a kport bug: one line here, the traceback in a file
        where = _save_crash(verb, err)
        print(f"kport {verb}: internal error (a bug in kport, please report it): "
              f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''} "
              f"-- the traceback is in {where}", file=sys.stderr)
        return EXIT_BUG
    except BaseException as err:  # SIGTERM or SIGHUP, cleaned up: exit 128 + the signal
        stop = lifetime.stopped_by(err)
        if stop is None:
            raise
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            print(f"kport {verb}: stopped by {stop}", file=sys.stderr)
        return 128 + stop.signum


if __name__ == "__main__":
    sys.exit(main())
