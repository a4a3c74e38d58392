"""The cheat-proof harness: judge one untrusted Metal port of a corpus case.

The trusted parent makes the inputs, runs the oracle (the case's Python reference, else the
CUDA kernel in cuda_sim) and compares. It compiles the candidate first (in the jail, under the
compile budget, once more if that runs out), so that the run budget measures the kernel, not
the machine's load. The candidate runs only in a child process (agent/harness_child.py) with
that wall-clock budget, memory/file/CPU limits, a scrubbed environment (no API keys) and its
own temporary directory; the parent reads back only the
arrays it asked for, never a verdict, and ignores the child's output. The checks follow
shared/reference/evaluator-hardening.md; docs/harness.md maps each of its 21 cases to a check
and a fixture in tests/evals.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import resource
import select
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from corpus.candidate import Launch
from corpus.cases import CaseError, CaseSpec
from corpus.check import compare, compiled_by, make_inputs, run_cuda, run_metal, run_reference
from corpus.port_check import case_with_port
from corpus.static_checks import static_findings
from kb.arch import chip as find_chip
from kb.arch import roofline_seconds
from runners.errors import KportError
from runners.lifetime import sweep, temp_folder
from runners.sandbox import die_with_parent, require_isolation
from runners.settings import load_settings
from runners.simhost import build_only

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
CHILD_MEMORY = 8 << 30
CHILD_FILE = 256 << 20
STOP_GRACE_S = 5.0  # a child told to stop (SIGTERM) gets this long to clean up, then SIGKILL


@dataclass
class Verdict:
    accepted: bool
    reasons: list[str] = field(default_factory=list)
    runs: list[dict] = field(default_factory=list)
    isolation: str = ""  # what the candidate ran in (runners.sandbox.Isolation.summary)
    compiler: str = ""  # what compiled it (corpus.check.compiled_by)

    def as_json(self) -> dict:
        return {"accepted": self.accepted, "reasons": self.reasons, "runs": self.runs,
                "isolation": self.isolation, "compiler": self.compiler}


def scrubbed_env() -> dict[str, str]:
    """The parent's environment without anything that looks like a credential."""
    return {k: v for k, v in os.environ.items()
            if not any(m in k.upper() for m in SECRET_MARKERS) and k not in ("KPORT_MODEL",
                                                                              "KPORT_BASE_URL")}


def _limits(cpu_seconds: int):
    """Soft limits on the child (our own code: the harness child and the simulator host);
    the candidate itself runs one level further down under the simulator's own hard limits
    (runners/simhost.py), which must stay free to set theirs."""
    on_parent_death = die_with_parent()

    def apply() -> None:
        os.setsid()
        on_parent_death()  # a killed kport leaves no candidate running
        inf = resource.RLIM_INFINITY
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, inf))
        resource.setrlimit(resource.RLIMIT_FSIZE, (CHILD_FILE, inf))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, inf))
    return apply


def run_candidate(case: CaseSpec, body: str, header: str, sizes: dict, inputs: dict,
                  timeout: float, launch: Launch | None = None, child: Child | None = None
                  ) -> tuple[dict | None, dict, dict, str]:
    """Compile the candidate here (``_build_first``), then run it in a harness child with
    ``timeout`` seconds for the run (and the child's start, when it starts for this run);
    (outputs, inputs afterwards, record, problem). ``launch`` (see ``judge``) replaces the
    case's ``[metal]`` launch; ``child`` serves the runs of one judge() call (a child of its
    own, ended after the run, when it is None)."""
    if child is None:
        with Child(timeout) as own:
            return run_candidate(case, body, header, sizes, inputs, timeout, launch, own)
    with temp_folder("kport-judge-") as tmp:
        work = Path(tmp)
        ported = _ported(case, work, body, header, launch)
        record, problem = _build_first(ported, sizes, inputs)
        if record or problem:
            return None, {}, record, problem
        arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
        scalars = {k: (v.item(), str(np.asarray(v).dtype)) for k, v in inputs.items()
                   if not isinstance(v, np.ndarray)}
        np.savez(work / "in.npz", **arrays)
        req = {"case": str(Path(case.folder).resolve()), "work": str(work), "body": body,
               "header": header, "sizes": sizes, "inputs": str(work / "in.npz"), "scalars": scalars,
               "outputs": str(work / "out.npz"), "after": str(work / "after.npz"),
               "record": str(work / "record.json"),
               "launch": launch.launch().model_dump() if launch else None}
        (work / "req.json").write_text(json.dumps(req))
        returncode, stderr = child.run(work / "req.json")
        if returncode is None:
            return None, {}, {}, (f"the run timed out after {timeout:g} s (a hang? the compile, "
                                  "done before, is not counted)")
        record = (json.loads((work / "record.json").read_text())
                  if (work / "record.json").is_file() else {})
        if returncode == 3:  # the harness itself broke: our bug, not the candidate's
            raise RuntimeError("agent.harness_child failed: " + stderr[-2000:])
        if returncode != 0 or not (work / "out.npz").is_file():
            if record:
                return None, {}, record, ""
            tail = stderr[-300:].strip()
            return None, {}, {}, f"the candidate's process died (exit {returncode}): {tail}"
        with np.load(work / "out.npz") as f:
            outs = {k: f[k] for k in f.files}
        with np.load(work / "after.npz") as f:
            after = {k: f[k] for k in f.files}
        return outs, after, record, ""


def _ported(case: CaseSpec, work: Path, body: str, header: str,
            launch: Launch | None) -> CaseSpec:
    """``case`` with the candidate as its Metal port, in ``work``/case: the same folder, text
    and launch the child uses, so that what is built here is what the child finds."""
    port = (launch or Launch.from_metal(case.metal)).with_source(body, header)
    return case_with_port(case, work / "case", port)


def _build_first(ported: CaseSpec, sizes: dict, inputs: dict) -> tuple[dict, str]:
    """Compile the candidate for ``sizes`` into the build cache (simhost.build_only: nothing
    runs), so the child's run budget holds no compile. Returns (record, problem): an empty
    record when it built, the failed build's record when it did not, and a problem when the
    compile ran out of KPORT_COMPILE_TIMEOUT twice (a busy machine gets a second try)."""
    for _ in range(2):
        try:
            with build_only():
                _, record = run_metal(ported, sizes, inputs)
        except (KportError, ValueError) as err:  # one the simulator or MLX's checks refuse
            return _record(False, [str(err)[:2000]]), ""
        if record.compiled:
            return {}, ""
        if not getattr(record.build, "timed_out", False):
            return _record(False, [str(d) for d in record.diagnostics][:20]), ""
    budget = load_settings().compile_timeout
    return {}, (f"did not compile: compile timed out after {budget:g} s, twice "
                "(KPORT_COMPILE_TIMEOUT; a compile-time bomb, or a machine too busy)")


def _record(compiled: bool, diagnostics: list[str]) -> dict:
    return {"compiled": compiled, "ok": False, "diagnostics": diagnostics, "findings": []}


class Child:
    """The harness child (agent/harness_child.py) that serves the runs of one judge() call, in
    its own session, with a scrubbed environment, soft limits and its own temporary folder.
    Started by the first run, and again by the run after one that timed out or ended it. A
    child that does not end by itself (a timeout; kport interrupted or terminated; the
    judge's end) is told to stop and, after STOP_GRACE_S, killed; what it left is swept."""

    def __init__(self, timeout: float, runs: int = 1):
        self.timeout, self.runs = timeout, runs
        self.proc: subprocess.Popen | None = None
        self.answers = -1  # the read end of the pipe the child says "done" on
        self.folder = temp_folder("kport-child-")

    def __enter__(self) -> Child:
        return self

    def __exit__(self, kind, *_) -> None:
        self._end(stop=kind is not None)  # interrupted mid-run: no waiting for the run
        self.folder.cleanup()

    def run(self, request: Path) -> tuple[int | None, str]:
        """Run the request at ``request``: (0 when the child answered, its exit code when it
        ended instead, None when ``timeout`` ran out first; its stderr when it ended)."""
        if self.proc is None:
            self._start()
        try:
            self.proc.stdin.write(f"{request}\n".encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it has ended: the answer pipe says so (end of file) below
        ready, _, _ = select.select([self.answers], [], [], self.timeout)
        if not ready:
            self._end(stop=True)
            return None, ""
        if os.read(self.answers, 64):
            return 0, ""
        returncode = self.proc.wait()
        self._end(stop=False)
        return returncode, self._stderr()

    def _start(self) -> None:
        read, write = os.pipe()
        env = {**scrubbed_env(), "TMPDIR": self.folder.name}
        # each run's CPU time is bounded by its wall-clock budget; these are the child's own
        cpu = int(self.timeout + 5) * self.runs
        try:
            with open(Path(self.folder.name) / "stderr", "ab") as stderr:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "agent.harness_child", str(write)],
                    cwd=self.folder.name, env=env, stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL, stderr=stderr, pass_fds=(write,),
                    preexec_fn=_limits(cpu))
        finally:
            os.close(write)
        self.answers = read

    def _stderr(self) -> str:
        path = Path(self.folder.name) / "stderr"
        text = path.read_bytes()[-4000:].decode(errors="replace") if path.is_file() else ""
        path.unlink(missing_ok=True)  # the next child's stderr starts empty
        return text

    def _end(self, stop: bool) -> None:
        """End the child: ``stop`` it (SIGTERM, then SIGKILL), or let it read the end of its
        requests and exit, stopping it only if it does not within STOP_GRACE_S."""
        proc, self.proc = self.proc, None
        if self.answers >= 0:
            os.close(self.answers)
            self.answers = -1
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        if not stop:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(STOP_GRACE_S)
        if proc.poll() is None:
            _stop(proc)
        elif proc.returncode != 0:
            sweep()  # a child that died leaves its /dev/shm launch folder


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the child cleans up: runners/lifetime.py), then SIGKILL; then sweep."""
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sweep()


def implausible_speed(seconds: float, bytes_moved: float, flops: float, chip: str) -> str:
    """Why a measured time cannot be real on ``chip`` (faster than its roofline: bandwidth and
    FP32 peak from kb/rules/arch), or "" when it can."""
    floor = roofline_seconds(find_chip(chip), bytes_moved, flops)
    if seconds < floor:
        return (f"{seconds * 1e6:.3f} us is faster than the {chip}'s roofline floor "
                f"{floor * 1e6:.3f} us for {bytes_moved:.3g} bytes and {flops:.3g} FLOP: the "
                "timing is wrong or the work was skipped")
    return ""


def _oracle(case: CaseSpec, sizes: dict, inputs: dict) -> dict:
    """The expected outputs; CaseError when the case's own code (its CUDA kernel or Python
    reference) cannot give them."""
    if case.check.reference == "cuda":
        outs, record = run_cuda(case, sizes, inputs)
        if not record.ok:
            why = [str(d) for d in record.diagnostics if d.severity == "error"][:2] or [
                str(f) for f in record.findings[:2]]
            raise CaseError(f"{case.folder / case.cuda.source}: the case's CUDA kernel (the "
                            f"oracle) failed at sizes {sizes}: {'; '.join(why)}")
        return outs
    return run_reference(case, sizes, inputs)


def _constant(a: np.ndarray) -> bool:
    a = np.asarray(a, dtype=np.float64).ravel()
    return a.size > 1 and bool(np.all(a == a[0]))


def judge(case: CaseSpec, body: str, header: str = "", *, seeds: int = 3,
          timeout: float = 120.0, launch: Launch | dict | None = None) -> Verdict:
    """Accept or reject a candidate body for ``case``'s ``[metal]`` launch, or for ``launch``
    when given (a translation's own: a corpus.candidate Launch or Candidate, or a dict of its
    fields, see Launch.of); returns the Verdict, every reason
    for a rejection listed. Every size set of the case is judged at ``seeds`` seeds (at least
    3), then one size set drawn for this call only (held-out sizes, see
    CaseSpec.held_out_sizes) at a fresh seed, then a repeat run. Raises ValueError for a
    ``launch`` without inputs, outputs, grid or threadgroup, RuntimeError when the harness
    child breaks, CaseError when the case's own oracle fails, SandboxUnavailable when there is
    no jail and no opt-out. ``timeout`` is each run's budget, compiling not included (that
    is KPORT_COMPILE_TIMEOUT); ValueError unless it is a positive, finite number."""
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")
    if launch is not None:
        launch = Launch.of(launch)
    verdict = Verdict(False, [f"static {s}" for s in static_findings(body, header)],
                      isolation=require_isolation().summary(), compiler=compiled_by())
    if verdict.reasons:
        return verdict
    draws = random.SystemRandom()  # nothing the candidate can see or predict
    held_out = case.held_out_sizes(draws)
    planned = [(sizes, 1000 + seed, False) for sizes in case.size_sets()
               for seed in range(max(seeds, 3))]
    if held_out is not None:
        planned.append((held_out, draws.randrange(1 << 30), True))
    with Child(timeout, runs=len(planned) + 1) as child:
        return _judge_runs(case, body, header, planned, timeout, launch, child, verdict)


def _judge_runs(case: CaseSpec, body: str, header: str, planned: list, timeout: float,
                launch: Launch | None, child: Child, verdict: Verdict) -> Verdict:
    """judge()'s runs: every (sizes, seed, held out) of ``planned``, then the repeat run."""
    seen: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for sizes, seed, hidden in planned:
        inputs = make_inputs(case, sizes, seed)
        want = _oracle(case, sizes, inputs)
        got, after, record, problem = run_candidate(case, body, header, sizes, inputs, timeout,
                                                    launch, child)
        run = {"sizes": sizes, "seed": seed, "ok": False, "why": "", "held_out": hidden}
        verdict.runs.append(run)
        why = problem or _judge_run(case, inputs, want, got, after, record, seen)
        run["ok"], run["why"] = not why, why
        if why:
            label = "held-out sizes" if hidden else "sizes"
            verdict.reasons.append(f"{label} {sizes} seed {seed}: {why}")
            return verdict  # the first failure says enough; later runs would repeat it
    # the same inputs again: a racy or nondeterministic candidate gives another answer
    sizes = case.size_sets()[0]
    inputs = make_inputs(case, sizes, 1000)
    want = _oracle(case, sizes, inputs)
    again, _, record, problem = run_candidate(case, body, header, sizes, inputs, timeout,
                                              launch, child)
    first = verdict.runs[0]
    if problem or again is None:
        verdict.reasons.append(f"repeat run failed: {problem or record.get('diagnostics')}")
        return verdict
    ok, _, why = compare(case, want, again)
    if not ok:
        verdict.reasons.append(f"repeat run of sizes {first['sizes']} seed 1000 differs: {why}")
        return verdict
    verdict.accepted = True
    return verdict


def _judge_run(case, inputs, want, got, after, record, seen) -> str:
    if not record.get("compiled", False):
        return "did not compile: " + "; ".join(record.get("diagnostics", [])[:3])
    if record.get("findings"):
        return "simulator findings: " + "; ".join(record["findings"][:3])
    for name, before in inputs.items():
        if isinstance(before, np.ndarray) and name in after and \
                not np.array_equal(after[name], before):
            return f"mutated its input {name!r}"
    for name, w in want.items():
        g = got.get(name)
        if g is None:
            continue
        if _constant(g) and not _constant(w):
            return f"{name!r} is constant while the reference is not"
        for iname, iv in inputs.items():
            if isinstance(iv, np.ndarray) and iv.shape == np.shape(g) and \
                    np.array_equal(iv, g) and not np.array_equal(iv, w):
                return f"{name!r} is a copy of the input {iname!r}"
        prev = seen.get(name)
        if prev is not None and prev[0].shape == np.shape(g) and np.array_equal(prev[0], g) \
                and not np.array_equal(prev[1], w):
            return f"{name!r} did not change with the inputs (cached or input-independent)"
        seen[name] = (np.asarray(g), np.asarray(w))
    ok, _, why = compare(case, want, got)
    return "" if ok else f"wrong result: {why}"
