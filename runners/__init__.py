"""Execution: simulators (metal_sim, cuda_sim), real-hardware runners, sandboxing, settings.

Runners are picked by name: ``runners.get("metal_sim")`` (the contract: runners/base.py)."""

from runners.base import get

__all__ = ["get"]

# Verbs this package adds to the `kport` command: name -> (module with main(argv), one-line help).
VERBS = {
    "sim": ("runners.sim_cli", "run a .cu kernel, a .metal kernel or an MLX body on .npy inputs"),
}
