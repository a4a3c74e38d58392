"""Shared by the batch-eval tests: the four cheap corpus cases and the `kport` CLI runner."""

from tests.cli import ROOT, kport

CHEAP = ["001_saxpy", "002_gelu_tanh", "005_bias_add_rows", "006_sum_partials"]
__all__ = ["CHEAP", "ROOT", "kport"]
