"""One candidate Metal port: the arguments of an MLX ``metal_kernel`` call and where it came
from. The translator makes the first one, the agent's drafts, repairs and optimisations make
the others, the harness judges one, the package writer ships one, MCP returns one.

:class:`Launch` is the call without its source (what a case's ``[metal]`` table gives besides
the file names, and what ``agent.harness.judge(launch=...)`` overrides); :class:`Candidate`
adds the Metal text (``body``, ``header``), ``origin`` (translator, llm:draft, llm:repair,
repair:<fix id>, opt:<action>, chat, edit, expert) and ``error``: an LLM reply with no usable
kernel is still a candidate, a failed record whose ``error`` says why (its body is the one it
was asked to change); it is checked as failed and never shipped.

Sizes stay expressions over the case's size names (``"ceil_div(n, 256) * 256"``) or ints, as
in case.toml. Lists may be empty here (a translation without a CUDA launch has no grid); a
launch that will run must name inputs, outputs, grid and threadgroup (``Launch.of``), and a
port placed in a case is validated again as the case's MetalSpec. Agent state holds candidates
as ``model_dump()`` dicts (plain JSON for the checkpointer); code reads them back through the
model.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from corpus.cases import Expr, MetalSpec

# What a launch that runs cannot do without (an empty list counts as missing).
_NEEDED = ("inputs", "outputs", "grid", "threadgroup")


def field_errors(errors: ValidationError, whole: str = "candidate") -> list[str]:
    """Pydantic's errors as 'field: message' each (``whole`` names an error of no field)."""
    return [f"{'.'.join(str(p) for p in e['loc']) or whole}: {e['msg']}"
            for e in errors.errors()]


class Launch(BaseModel):
    """The arguments of an MLX ``metal_kernel`` call besides the source: argument names, grid
    (threads, not threadgroups) and threadgroup, template arguments, atomic outputs and the
    outputs' start value."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    inputs: list[str]
    outputs: list[str]
    grid: list[Expr]
    threadgroup: list[Expr]
    template: dict[str, int | bool | str] = Field(default_factory=dict)
    atomic_outputs: bool = False
    init_value: float | None = None
    # an input or output whose name Metal cannot take (`kernel`) -> the port's name for it
    names: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def of(cls, value: Launch | Mapping) -> Launch:
        """The launch of a Launch or Candidate, or of a mapping holding its fields (others, a
        candidate's body for one, are ignored; None means the default). Raises ValueError
        "launch override lacks inputs, grid" when one of inputs, outputs, grid or threadgroup
        is missing or empty, and a ValueError naming the field for a wrong value."""
        data = value.model_dump() if isinstance(value, BaseModel) else dict(value)
        missing = [k for k in _NEEDED if not data.get(k)]
        if missing:
            raise ValueError(f"launch override lacks {', '.join(missing)}")
        fields = {k: v for k, v in data.items() if k in Launch.model_fields and v is not None}
        try:
            return Launch.model_validate(fields)
        except ValidationError as err:
            raise ValueError(f"launch override: {'; '.join(field_errors(err))}") from None

    @classmethod
    def from_metal(cls, spec: MetalSpec) -> Launch:
        """A case's ``[metal]`` launch (its source and header file names left out)."""
        return Launch.model_validate(spec, from_attributes=True)

    def with_source(self, body: str, header: str = "", origin: str = "") -> Candidate:
        """This launch with Metal text: a Candidate."""
        return Candidate(**self.launch().model_dump(), body=body, header=header, origin=origin)

    def launch(self) -> Launch:
        """The launch part alone (a copy for a Launch); its ``model_dump()`` is JSON-ready."""
        return Launch.model_validate(self.model_dump(include=set(Launch.model_fields)))


class Candidate(Launch):
    """One Metal port: a launch, its body and header, its origin, and ``error`` when it is a
    failed record (an LLM reply with no usable kernel)."""

    body: str
    header: str = ""
    origin: str = ""
    error: str | None = None

    @classmethod
    def from_translation(cls, tr, origin: str = "translator") -> Candidate:
        """The candidate of a translation: an ``agent.translate.Translation``, its
        ``translation_json`` dict, or another candidate's dict (their other keys ignored).
        Raises pydantic's ValidationError (a ValueError) naming each field that lacks."""
        data = tr.model_dump() if isinstance(tr, BaseModel) else (
            tr if isinstance(tr, Mapping) else vars(tr))
        fields = {k: v for k, v in data.items() if k in cls.model_fields}
        return cls.model_validate({**fields, "origin": origin, "error": None})

    @classmethod
    def from_case(cls, case, origin: str = "expert") -> Candidate:
        """A case's own ``[metal]`` port (a corpus.cases.CaseSpec with one), its files read."""
        m = case.metal
        header = (case.folder / m.header).read_text() if m.header else ""
        return Launch.from_metal(m).with_source((case.folder / m.source).read_text(), header,
                                                origin)
