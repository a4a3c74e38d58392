"""Check a translated (or generated) Metal port against a corpus case's oracle: the case's own
check (every size set, its seeds, simulator findings fail a run) with the port in place of the
case's expert one."""

from __future__ import annotations

import shutil
from pathlib import Path

from corpus.cases import CaseSpec, MetalSpec
from corpus.check import Outcome, check_case
from runners.errors import KportError
from runners.lifetime import temp_folder

PORT, HEADER = "kport_port.metal", "kport_header.metal"


def case_with_port(case: CaseSpec, folder: Path, *, body: str, header: str, inputs: list[str],
                   outputs: list[str], grid: list, threadgroup: list, template: dict,
                   atomic_outputs: bool = False, init_value: float | None = None) -> CaseSpec:
    """A copy of ``case`` in ``folder`` whose Metal port is the given one."""
    shutil.copytree(case.folder, folder, dirs_exist_ok=True)
    (folder / PORT).write_text(body)
    if header.strip():
        (folder / HEADER).write_text(header)
    metal = MetalSpec(source=PORT, header=HEADER if header.strip() else "", inputs=inputs,
                      outputs=outputs, grid=grid, threadgroup=threadgroup, template=template,
                      atomic_outputs=atomic_outputs,
                      init_value=init_value if init_value is not None else (
                          case.metal.init_value if case.metal else None))
    return case.model_copy(update={"folder": folder, "metal": metal})


def check_translation(case: CaseSpec, tr, seeds: int | None = None) -> list[Outcome]:
    """Run ``tr`` (an agent.translate.Translation) through the case's check."""
    with temp_folder("kport-port-") as tmp:
        c = case_with_port(case, Path(tmp), body=tr.body, header=tr.header, inputs=tr.inputs,
                           outputs=tr.outputs, grid=tr.grid, threadgroup=tr.threadgroup,
                           template=tr.template, atomic_outputs=tr.atomic_outputs,
                           init_value=tr.init_value)
        try:
            return check_case(c, seeds)
        except KportError as err:  # a port the simulator cannot take is a failed check
            return [Outcome(case.id, case.sizes, 0, metal="FAIL", notes=[f"metal: {err}"])]
