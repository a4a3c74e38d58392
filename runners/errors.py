"""The one base class of errors meant for people: the CLI prints the message, not a traceback."""


class KportError(Exception):
    """Bad input or configuration. The message names the file, key or variable and the fix."""


class UnknownRunner(KportError):
    """A runner name that runners.get does not know (runners/base.py NAMES: the modules of
    runners/ that define RUNNER)."""
