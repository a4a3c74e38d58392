"""Chip parameters for the GPU cost model (runners/perf_model.py), from
kb/rules/arch/perf_chips.toml (NVIDIA parts, and what Apple chips share) and chips.toml (each
Apple chip's bandwidth, cores and FP32 rate)."""

from __future__ import annotations

import re
import tomllib

from kb.arch import ARCH_DIR, ArchError, chips
from runners.perf_model import ChipParams

PERF_CHIPS = ARCH_DIR / "perf_chips.toml"


def _table() -> dict:
    try:
        return tomllib.loads(PERF_CHIPS.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ArchError(f"{PERF_CHIPS}: {err}") from None


def _fields(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k in ChipParams.__dataclass_fields__}


def _apple(c, common: dict) -> ChipParams | None:
    cores = [int(x) for x in re.findall(r"\d+", c.gpu_cores or "")]
    if not cores or c.bandwidth_gbs is None or c.fp32_tflops is None:
        return None  # no published figures to model it with
    n = max(cores)
    bw = c.bandwidth_gbs * 1e9
    return ChipParams(name=c.name, bandwidth_Bps=bw, l2_Bps=bw * common["l2_bandwidth_factor"],
                      cores=n, clock_hz=c.fp32_tflops * 1e12 / (n * 128 * 2),
                      lanes_per_core_clock=128, **_fields(common))


def perf_chips() -> dict[str, ChipParams]:
    """Every chip the model knows, by name."""
    raw = _table()
    out = {}
    for entry in raw.get("chip", []):
        try:
            out[entry["name"]] = ChipParams(**_fields(entry))
        except TypeError as err:
            raise ArchError(f"{PERF_CHIPS}: chip {entry.get('name', '?')}: {err}") from None
    for c in chips():
        params = _apple(c, raw["apple"])
        if params is not None:
            out[c.name] = params
    return out


def perf_chip(name: str) -> ChipParams:
    """The chip named ``name`` (case-insensitive); ArchError listing the known ones."""
    known = perf_chips()
    for key, params in known.items():
        if key.lower() == name.lower():
            return params
    raise ArchError(f"unknown chip {name!r}; one of {', '.join(known)}")
