"""Check a translated (or generated) Metal port against a corpus case's oracle: the case's own
check (every size set, its seeds, simulator findings fail a run) with the port in place of the
case's expert one."""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import ValidationError

from corpus.candidate import Candidate, field_errors
from corpus.cases import CaseSpec, MetalSpec
from corpus.check import Outcome, check_case
from runners.errors import KportError
from runners.lifetime import temp_folder

PORT, HEADER = "kport_port.metal", "kport_header.metal"


def case_with_port(case: CaseSpec, folder: Path, port: Candidate) -> CaseSpec:
    """A copy of ``case`` in ``folder`` whose Metal port is ``port`` (its init_value, when
    None, is the case's). Raises ValueError, one line naming each field, for a launch a
    case's ``[metal]`` cannot hold (no outputs, no grid, more than 3 dimensions ...)."""
    shutil.copytree(case.folder, folder, dirs_exist_ok=True)
    (folder / PORT).write_text(port.body)
    if port.header.strip():
        (folder / HEADER).write_text(port.header)
    launch = port.launch().model_dump()
    if launch["init_value"] is None and case.metal is not None:
        launch["init_value"] = case.metal.init_value
    try:
        metal = MetalSpec(source=PORT, header=HEADER if port.header.strip() else "", **launch)
    except ValidationError as err:
        raise ValueError(launch_problem(err)) from None
    return case.model_copy(update={"folder": folder, "metal": metal})


def launch_problem(err: ValidationError) -> str:
    """One line for a launch a case's ``[metal]`` cannot hold, naming each field."""
    parts = field_errors(err, "launch")
    for i, e in enumerate(err.errors()):
        if e["loc"] == ("outputs",) and e["type"] == "too_short":
            parts[i] = ("outputs: none (kport found no buffer the kernel writes: name the "
                        "outputs with role = \"out\" in a case.toml, docs/corpus.md)")
    return "the port's launch cannot be checked: " + "; ".join(parts)


def check_translation(case: CaseSpec, tr, seeds: int | None = None,
                      size_sets: list[dict[str, int]] | None = None) -> list[Outcome]:
    """Run ``tr`` (a Candidate, or an agent.translate.Translation) through the case's check,
    or at ``size_sets`` instead of the case's own when given; returns its Outcomes (a port the
    simulator cannot take is one failed Outcome)."""
    port = tr if isinstance(tr, Candidate) else Candidate.from_translation(tr)
    if size_sets is not None:
        case = case.model_copy(update={"sizes": size_sets[0],
                                       "variants": [dict(s) for s in size_sets[1:]]})
    with temp_folder("kport-port-") as tmp:
        c = case_with_port(case, Path(tmp), port)
        try:
            return check_case(c, seeds)
        except KportError as err:  # a port the simulator cannot take is a failed check
            return [Outcome(case.id, case.sizes, 0, metal="FAIL", notes=[f"metal: {err}"])]
