"""What the simulators raise from their drop-in APIs (harnesses use the records instead)."""

from __future__ import annotations

from runners.simbuild import Diagnostic
from runners.simhost import Finding


class CompileError(RuntimeError):
    """The kernel did not compile; ``diagnostics`` point at the user's own files and lines."""

    def __init__(self, api: str, name: str, diagnostics: list[Diagnostic], log: str):
        self.diagnostics = diagnostics
        shown = "\n".join(str(d) for d in diagnostics if d.severity == "error") or log[-3000:]
        super().__init__(f"[{api}] Unable to build `{name}` in the simulator:\n{shown}")


class KernelFault(RuntimeError):
    """The kernel ran but misbehaved; ``findings`` say what, where and in which thread."""

    def __init__(self, api: str, name: str, findings: list[Finding]):
        self.findings = findings
        lines = "\n".join(f"  {f}" for f in findings[:20])
        more = f"\n  ... and {len(findings) - 20} more" if len(findings) > 20 else ""
        super().__init__(f"[{api}] `{name}` faulted in the simulator:\n{lines}{more}")
