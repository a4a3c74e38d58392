"""The untrusted side of the harness: run one candidate Metal port on inputs the parent wrote,
write what it produced (and the inputs as they are afterwards) where the parent said. Started by
agent/harness.py in a child process with limits, a scrubbed environment and its own temporary
directory; whatever it prints is never read as a verdict. The parent compiled the candidate
before (agent/harness.py _build_first), so its build here is found in the cache; the record
says so (``build_cached``). Told to stop (SIGTERM), it cleans up and exits 143.

    python -m agent.harness_child FD

One child serves the runs of one judge() call: it reads a request path per line on stdin and
writes "done" on file descriptor FD once that run's files are written. That saves a Python
start and kport's imports (~0.5 s) per run; the parent still gives every run its own budget,
and starts a new child after one that timed out or died.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str]) -> int:
    # lazy: here, a failed import exits 3 below (our bug: the parent raises it), not 1
    # (which the parent reads as the candidate's process dying)
    from runners.lifetime import raise_on_termination

    raise_on_termination()  # the parent's SIGTERM: jails killed, scratch removed, then exit
    answers = int(argv[0])
    for line in sys.stdin:
        run_request(Path(line.strip()))
        os.write(answers, b"done\n")
    return 0


def run_request(path: Path) -> None:
    """One run: the request at ``path`` (see agent/harness.py run_candidate), its outputs,
    inputs afterwards and record written where it says."""
    # lazy: as in main
    from corpus.candidate import Launch
    from corpus.cases import load_case
    from corpus.check import run_metal
    from corpus.port_check import case_with_port
    from runners.errors import KportError

    req = json.loads(path.read_text())
    case = load_case(Path(req["case"]))
    work = Path(req["work"])
    # the launch: the request's override (a translation's own), else the case's [metal]
    launch = Launch.of(req["launch"]) if req.get("launch") else Launch.from_metal(case.metal)
    ported = case_with_port(case, work / "case", launch.with_source(req["body"], req["header"]))
    with np.load(req["inputs"]) as f:
        inputs = {k: f[k] for k in f.files}
    scalars = req["scalars"]
    for name, (value, dtype) in scalars.items():
        inputs[name] = np.dtype(dtype).type(value)
    order = [a.name for a in case.args]
    inputs = {k: inputs[k] for k in order if k in inputs}
    try:
        outs, record = run_metal(ported, req["sizes"], inputs)
    except KportError as err:  # a candidate the simulator cannot take: a failed run
        Path(req["record"]).write_text(json.dumps({"compiled": False, "ok": False,
                                                   "diagnostics": [str(err)[:2000]],
                                                   "findings": []}))
        return
    np.savez(req["outputs"], **{k: np.asarray(v) for k, v in outs.items()})
    np.savez(req["after"], **{k: v for k, v in inputs.items() if isinstance(v, np.ndarray)})
    Path(req["record"]).write_text(json.dumps({
        "compiled": record.compiled, "ok": record.ok,
        "diagnostics": [str(d) for d in record.diagnostics][:20],
        "findings": [str(f) for f in record.findings][:20],
        "build_cached": bool(getattr(record.build, "cached", False))}))


if __name__ == "__main__":
    from runners.lifetime import Terminated

    try:
        sys.exit(main(sys.argv[1:]))
    except Terminated as stop:
        sys.exit(128 + stop.signum)
    except MemoryError:
        sys.exit(4)  # the limits stopped a runaway allocation
    except Exception:  # noqa: BLE001 - a bug of ours: the parent raises it, it is no verdict
        import traceback

        traceback.print_exc()
        sys.exit(3)
