"""The ``-I``/``-D`` options of every verb that reads a CUDA file where it sits (``kport
translate``, ``port``, ``sim`` and ``kb rules``): one spelling and one help text."""

from __future__ import annotations

import typer

INCLUDE_HELP = ("a folder of headers, as nvcc -I (the source's own folder is searched first); "
                "repeat")
DEFINE_HELP = "NAME or NAME=VALUE, as nvcc -D (e.g. -D GGML_CUDA_F16); repeat"


def include_option():  # a typer OptionInfo
    """The ``-I/--include-dir`` option of a verb that reads a CUDA file."""
    return typer.Option([], "--include-dir", "-I", help=INCLUDE_HELP)


def define_option():  # a typer OptionInfo
    """The ``-D/--define`` option of a verb that reads a CUDA file."""
    return typer.Option([], "--define", "-D", help=DEFINE_HELP)
