"""Apple GPU architecture facts as data (kb/rules/arch/*.toml): chips for rooflines and
performance lints, limits and features that change how a kernel is ported. Every entry names
its sources (keys of shared/reference/apple-gpu-facts.md); inferred figures are `unconfirmed`."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    model_validator,
)

from runners.errors import KportError

ARCH_DIR = Path(__file__).resolve().parent / "rules" / "arch"


class ArchError(KportError):
    """An architecture file is wrong, or a chip is unknown."""


class Chip(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    gpu_cores: str
    bandwidth_gbs: float | None = None
    fp32_tflops: float | None = None
    fp32_note: str = ""
    fp16_to_fp32: str = ""
    family: str
    mlx_arch: str = ""
    sources: list[str] = Field(min_length=1)
    unconfirmed: bool = False


class Feature(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    fact: str
    applies: str
    sources: list[str] = Field(min_length=1)
    asked: list[str] = Field(default_factory=list)  # as kb.concepts.Rule.asked


V = TypeVar("V")


class _Sourced(BaseModel):
    """A fact with its sources; one without sources must say ``unconfirmed = true``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    sources: list[str] = Field(default_factory=list)
    unconfirmed: bool = False
    note: str = ""

    @model_validator(mode="after")
    def _sourced(self):
        if not self.sources and not self.unconfirmed:
            raise ValueError("an entry without sources must say `unconfirmed = true`")
        return self


class Figure(_Sourced, Generic[V]):
    """One per-family figure with its sources."""

    value: V


class Family(BaseModel):
    """An Apple GPU family (MTLGPUFamily): limits and features a ported kernel depends on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^Apple\d+$")
    devices: list[str] = Field(min_length=1)
    sources: list[str] = Field(min_length=1)
    unconfirmed: bool = False  # the family's identity (which devices) is itself inferred
    note: str = ""
    simd_width: Figure[StrictInt]
    max_threads_per_threadgroup: Figure[StrictInt]
    threadgroup_memory_bytes: Figure[StrictInt]
    bfloat: Figure[Literal["native", "emulated", "none"]]
    simdgroup_matrix: Figure[StrictBool]  # 8x8
    mma_16x16: Figure[StrictBool]
    atomic_float_device: Figure[StrictBool]
    atomic_float_threadgroup: Figure[StrictBool]
    atomic_64bit: Figure[Literal["none", "ulong min/max", "all"]]
    fp64: Figure[StrictBool]
    simd_reductions: Figure[StrictBool]
    simd_shift_fill: Figure[StrictBool]
    dynamic_caching: Figure[StrictBool]

    def figures(self) -> dict[str, Figure]:
        """Every figure of the family by key, in file order."""
        return {k: v for k, v in self if isinstance(v, Figure)}

    def unconfirmed_figures(self) -> list[str]:
        """Keys of the figures nobody has confirmed."""
        return [k for k, v in self.figures().items() if v.unconfirmed]


class MslVersion(_Sourced):
    """The Metal Shading Language version MLX compiles with on one macOS major."""

    macos: StrictInt
    version: str = Field(pattern=r"^\d+\.\d+$")


def _load(name: str, key: str, model, folder: Path = ARCH_DIR):
    """Entries of table ``key`` in ``folder/name`` as ``model``s; ArchError naming the file,
    the entry (by name/id, else its number) and the key."""
    path = folder / name
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ArchError(f"{path}: {err}") from None
    out = []
    for i, entry in enumerate(raw.get(key, [])):
        try:
            out.append(model(**entry))
        except ValidationError as err:
            e = err.errors()[0]
            label = entry.get("name") or entry.get("id") or f"#{i + 1}"
            where = ".".join(str(p) for p in e["loc"])
            raise ArchError(f"{path}: {key} {label} key `{where}`: {e['msg']}") from None
    return out


def chips() -> list[Chip]:
    return _load("chips.toml", "chip", Chip)


def features() -> list[Feature]:
    return _load("features.toml", "feature", Feature)


def chip(name: str) -> Chip:
    """The chip named ``name`` (case-insensitive, e.g. "M2 Max"); ArchError naming the known."""
    for c in chips():
        if c.name.lower() == name.lower():
            return c
    raise ArchError(f"unknown chip {name!r}; one of {', '.join(c.name for c in chips())}")


def roofline_seconds(c: Chip, bytes_moved: float, flops: float) -> float:
    """Lower bound on a kernel's time: max(bytes / bandwidth, flops / FP32 peak). ArchError when
    the chip's figures are not published."""
    if c.bandwidth_gbs is None or c.fp32_tflops is None:
        raise ArchError(f"{c.name}: no published bandwidth or FP32 peak to bound a roofline")
    return max(bytes_moved / (c.bandwidth_gbs * 1e9), flops / (c.fp32_tflops * 1e12))


def families(folder: Path = ARCH_DIR) -> list[Family]:
    """Every family of ``folder/families.toml``; ArchError naming file, family and key, or a
    repeated name."""
    out = _load("families.toml", "family", Family, folder)
    seen: set[str] = set()
    for f in out:
        if f.name in seen:
            raise ArchError(f"{folder / 'families.toml'}: family {f.name} is defined twice")
        seen.add(f.name)
    return out


def family(name: str, folder: Path = ARCH_DIR) -> Family:
    """The family named ``name`` (case-insensitive, e.g. "apple9"); ArchError naming the known."""
    known = families(folder)
    for f in known:
        if f.name.lower() == name.lower():
            return f
    raise ArchError(f"unknown GPU family {name!r}; one of {', '.join(f.name for f in known)}")


def family_of_chip(chip_name: str) -> Family:
    """The family of chip ``chip_name`` as chips.toml gives it; ArchError for an unknown chip or
    a family missing from families.toml."""
    c = chip(chip_name)
    try:
        return family(c.family)
    except ArchError:
        raise ArchError(f"{ARCH_DIR / 'chips.toml'}: chip {c.name} key `family`: {c.family!r} "
                        f"is not in families.toml; add it there or fix the chip") from None


def msl_versions(folder: Path = ARCH_DIR) -> list[MslVersion]:
    """The MSL version per macOS major, oldest first."""
    return sorted(_load("families.toml", "msl", MslVersion, folder), key=lambda m: m.macos)


def msl_for_macos(major: int) -> MslVersion:
    """The MSL version MLX compiles with on macOS ``major``; ArchError before the first known."""
    found = [m for m in msl_versions() if m.macos <= major]
    if not found:
        raise ArchError(f"no MSL version known for macOS {major}; the table starts at "
                        f"{msl_versions()[0].macos}")
    return found[-1]
