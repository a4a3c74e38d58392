"""The runner contract: every execution target is one module of this package that defines
``RUNNER`` (a Runner), and callers get it by name with ``runners.get(name)``.

A runner makes kernels with its language's own constructor, and a kernel's ``launch(...)``
returns a LaunchRecord: a candidate's failures (compile errors, sanitizer findings, faults on
the device) are records, never exceptions; an exception means bad arguments or a broken harness.

Adding a target is one new file: a module ``runners/<name>.py`` (or a package) whose code
assigns ``RUNNER = Runner(...)`` at the top level. NAMES finds them by reading the package's
sources, importing none of them; tests/sim/test_runner_contract.py checks that against the
modules' syntax trees and runs every runner through the contract.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from runners.errors import UnknownRunner

if TYPE_CHECKING:
    from runners.simbuild import Diagnostic
    from runners.simhost import Finding



def _runner_modules() -> tuple[str, ...]:
    """The names of this package's modules (and subpackages) that define RUNNER."""
    here = Path(__file__).resolve().parent
    found = []
    for path in sorted([*here.glob("*.py"), *here.glob("*/__init__.py")]):
        if re.search(r"^RUNNER = Runner\(", path.read_text(errors="replace"), re.M):
            found.append(path.parent.name if path.name == "__init__.py" else path.stem)
    return tuple(found)


NAMES = _runner_modules()


@dataclass(frozen=True)
class Timing:
    """Repeated timed launches on real hardware: seconds per launch, the launch only."""

    median_s: float
    min_s: float
    reps: int


@dataclass
class LaunchRecord:
    """What one launch of a kernel gives back, on every runner.

    ``outputs``: Metal runners, one mx.array per output; CUDA runners, the caller's numpy array
    arguments in order (written in place); empty when the launch did not finish. ``findings``
    come from the simulators' sanitizers; real hardware has none, so there it is always empty
    and out-of-bounds accesses or races go unreported. ``error`` is a fault the device reported
    without a finding (real hardware). ``kernel_s`` is one launch as the runner sees it (the
    simulators: running the threadgroups; mlx_metal: the call and evaluation, compile
    included), not a GPU measurement; ``timing`` is that, from ``reps`` timed launches on
    hardware runners (None elsewhere or without reps).
    """

    compiled: bool
    findings: list[Finding] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)  # on the user's lines
    outputs: list = field(default_factory=list)
    printf: str = ""
    source: str = ""  # the kernel text compiled: MLX's generated function; the CUDA source
    error: str = ""
    kernel_s: float = 0.0
    timing: Timing | None = None

    @property
    def ok(self) -> bool:
        """Compiled, and ran with no finding and no device error."""
        return self.compiled and not self.findings and not self.error


class Kernel(Protocol):
    """What ``Runner.kernel(...)`` returns."""

    def launch(self, *args, **kwargs) -> LaunchRecord:
        """Run once with the language's launch arguments and return the record: CUDA
        ``launch(grid, block, args, shared_mem=0)``; Metal MLX's keyword arguments
        (``inputs=, output_shapes=, output_dtypes=, grid=, threadgroup=, template=,
        init_value=``). Hardware runners also take ``reps=N`` and fill ``record.timing``."""


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Runner:
    """One execution target. ``kernel`` is the language's own constructor: CUDA
    ``kernel(code, name, options=(), filename=...)`` (CuPy's RawKernel), Metal
    ``kernel(name, input_names, output_names, source, header="", ...)`` (MLX's
    ``mx.fast.metal_kernel``); either returns a Kernel."""

    name: str
    language: Literal["cuda", "metal"]
    hardware: bool  # a real device (timings mean something) rather than a simulator
    kernel: Callable[..., Kernel]
    needs: str = ""  # what the runner needs to run, said when it is not available
    probe: Callable[[], bool] = _always

    def available(self) -> bool:
        """True when this machine can run the runner's kernels."""
        return bool(self.probe())

    def reason(self) -> str:
        """Why the runner is unavailable here; "" when it is available."""
        return "" if self.available() else self.needs


def get(name: str) -> Runner:
    """The runner called ``name``, its module imported on first use; raises UnknownRunner
    naming the known ones."""
    if name not in NAMES:
        raise UnknownRunner(f"no runner named {name!r}; the runners are {', '.join(NAMES)} "
                            "(the modules of runners/ that define RUNNER)")
    return importlib.import_module(f"runners.{name}").RUNNER
