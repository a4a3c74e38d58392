"""Execution: simulators (metal_sim, cuda_sim), real-hardware runners, sandboxing, settings."""

# Verbs this package adds to the `kport` command: name -> (module with main(argv), one-line help).
VERBS = {
    "sim": ("runners.sim_cli", "run a .cu kernel or .metal metal_kernel body on .npy inputs"),
}
