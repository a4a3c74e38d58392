"""Apple GPU architecture facts as data (kb/rules/arch/*.toml): chips for rooflines and
performance lints, limits and features that change how a kernel is ported. Every entry names
its sources (keys of shared/reference/apple-gpu-facts.md); inferred figures are `unconfirmed`."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


def _load(name: str, key: str, model):
    path = ARCH_DIR / name
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
            raise ArchError(f"{path}: {key} #{i + 1} key `{'.'.join(map(str, e['loc']))}`: "
                            f"{e['msg']}") from None
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
