"""Time every variant of evals/perf_cases.py on an NVIDIA GPU through runners.cuda_gpu.

    python -m evals.perf_time OUT.json [--reps 50] [--heldout]

Builds all variants in parallel with nvcc, then runs each once (the untimed launch is the
warm-up) and ``reps`` timed launches (CUDA events; the median is kept). Writes
{"device", "reps", "results": [{"name", "family", "median_s", "min_s"} | {"name", "error"}]}.
``--heldout`` times the held-out set (evals/perf_cases.py HELDOUT_VARIANTS) instead.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import runners
from evals.perf_cases import HELDOUT_VARIANTS, ROOT, VARIANTS, make_args


def _kernel(v):
    return runners.get("cuda_gpu").kernel((ROOT / v.file).read_text(), v.kernel,
                                          filename=v.file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--heldout", action="store_true",
                        help="time the held-out variants (HELDOUT_VARIANTS) instead")
    args = parser.parse_args(argv)
    variants = HELDOUT_VARIANTS if args.heldout else VARIANTS
    gpu = runners.get("cuda_gpu")
    if not gpu.available():
        print(gpu.reason(), file=sys.stderr)
        return 2
    kernels = {v.name: _kernel(v) for v in variants}
    with ThreadPoolExecutor(16) as pool:
        built = dict(zip(kernels, pool.map(lambda k: k._build(), kernels.values()), strict=True))
    device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,"
                             "noheader"], capture_output=True, text=True).stdout.strip()
    results = []
    for v in variants:
        exe, log = built[v.name]
        if exe is None:
            results.append({"name": v.name, "family": v.family, "error": log[-800:]})
            print(v.name, "BUILD FAILED", log[-400:], flush=True)
            continue
        run = kernels[v.name].launch(v.grid, v.block, make_args(v), reps=args.reps)
        if run.timing is None:
            results.append({"name": v.name, "family": v.family, "error": run.error[-800:]})
            print(v.name, "FAILED", run.error[-400:], flush=True)
            continue
        results.append({"name": v.name, "family": v.family, "median_s": run.timing.median_s,
                        "min_s": run.timing.min_s})
        print(f"{v.name:32s} {run.timing.median_s * 1e6:10.1f} us", flush=True)
    with open(args.out, "w") as f:
        json.dump({"device": device, "reps": args.reps, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
