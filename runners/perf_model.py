"""A GPU cost model: simulator counters plus a chip's parameters -> predicted time.

The counters come from a counting launch of cuda_sim (``RawKernel.launch(..., count=True)``;
runners/simcore/rt/counters.cpp). Each resource gets a time; the largest is the bottleneck and
the prediction is launch overhead + the largest + ``OVERLAP`` x the others (resources overlap
only partly). Terms (docs/perf-model.md):
- dram: bytes from memory at the chip's bandwidth, or at what the loads in flight allow
  (Little's law: resident warps x bytes per warp instruction x ILP / latency), whichever is less;
  the bytes are the launch's footprint when it fits in L2, else each group's distinct 64-byte
  read segments plus its distinct written sectors (a sector a warp writes only part of is
  read first: ECC memory merges the rest);
- l2: every sector the warps' instructions touch, at the L2's bandwidth;
- shared: shared-memory wavefronts (bank conflicts included), one per SM per clock;
- compute: lane operations counted by class (runners/opcount.py) at the issue rate and each
  class at its own rate (transcendentals, integer multiplies, fp64 are slower); counters
  without them fall back to an estimate from the source (``arithmetic_estimate``);
- atomics: serialised same-address updates; sync: barriers and warp collectives;
- groups: cores starting threadgroups (many tiny groups cost time of their own).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from runners.srcrewrite import tokenize

OVERLAP = 0.25
HOT_SHARE = 0.25  # a buffer read by many groups stays in L2 if it is this share of it at most
BARRIER_CLOCKS = 4  # est.: issue cost of one warp's barrier arrival; a collective costs 1
_SCALED_NOT = {"shared_bytes_per_group", "atomic_addresses"}


@dataclass(frozen=True)
class ChipParams:
    """What the model needs of a GPU (kb/rules/arch/perf_chips.toml gives them, with sources)."""

    name: str
    bandwidth_Bps: float  # DRAM
    dram_efficiency: float  # the share of it a streaming copy reaches
    l2_bytes: int
    l2_Bps: float
    cores: int  # SMs / GPU cores
    clock_hz: float
    lanes_per_core_clock: int  # fp32 lanes per core per clock (issue rate of lane operations)
    max_threads_per_core: int
    max_groups_per_core: int
    shared_bytes_per_core: int
    memory_latency_s: float
    launch_overhead_s: float
    same_address_atomic_s: float
    group_launch_s: float  # a core starting one threadgroup
    simd_width: int = 32
    # Lane operations per core per clock by class (runners/opcount.py CLASSES); None: the fp32
    # rate (lanes_per_core_clock)
    fp16_per_core_clock: float | None = None
    fp64_per_core_clock: float | None = None
    int_per_core_clock: float | None = None
    int_mul_per_core_clock: float | None = None
    transcendental_per_core_clock: float | None = None

    def rate(self, cls: str) -> float:
        """Lane operations of class ``cls`` per core per clock."""
        value = None if cls == "fp32" else getattr(self, f"{cls}_per_core_clock")
        return float(value or self.lanes_per_core_clock)


@dataclass(frozen=True)
class Launch:
    groups: int
    threads_per_group: int


@dataclass
class Prediction:
    predicted_s: float
    bottleneck: str
    terms_s: dict[str, float]
    occupancy: float
    dram_bytes: float
    notes: list[str]
    counters: dict = field(default_factory=dict)  # what it was predicted from, when kept

    def as_dict(self) -> dict:
        return asdict(self)


def scale_counters(counters: dict[str, int], total_groups: int,
                   buffer_bytes: int | None = None) -> dict[str, float]:
    """Counters of a run over a prefix of the grid, scaled to ``total_groups`` blocks (valid
    for grid-uniform kernels). The footprint is capped at ``buffer_bytes``; the largest shared
    memory per block and the distinct atomic addresses are kept as counted."""
    counted = max(1, counters.get("groups", 1))
    factor = total_groups / counted
    out = {k: (v if k in _SCALED_NOT else v * factor) for k, v in counters.items()
           if k != "buffers"}
    if buffer_bytes is not None and "footprint_sectors" in out:
        out["footprint_sectors"] = min(out["footprint_sectors"], 2 * buffer_bytes / 32)
    if "buffers" in counters:
        out["buffers"] = {
            name: {"bytes": b["bytes"],
                   "read_sectors": min(b["read_sectors"] * factor, b["bytes"] / 32),
                   "written_sectors": min(b["written_sectors"] * factor, b["bytes"] / 32),
                   "group_read_segments64": b["group_read_segments64"] * factor}
            for name, b in counters["buffers"].items()}
    return out


_ARITH = {"+", "-", "*", "/", "+=", "-=", "*=", "/=", "%", "<<", ">>", "&", "|", "^"}
_MATH = ("exp", "log", "tanh", "sqrt", "rsqrt", "sin", "cos", "pow", "erf", "fma", "max", "min")


def arithmetic_estimate(code: str, kernel: str = "") -> float:
    """Lane operations per lane memory access, estimated from the source (not counted): the
    arithmetic operators and math calls of the file over its subscripts and dereferences."""
    toks = tokenize(code)
    ops = sum(1 for t in toks if t.text in _ARITH or
              (t.kind == "identifier" and t.text.lstrip("_").startswith(_MATH)))
    accesses = sum(1 for t in toks if t.text in ("[", "->")) or 1
    return max(1.0, ops / accesses)


def _dram_reads(counters: dict, chip: ChipParams) -> float:
    """Bytes read from DRAM when the launch does not fit in L2: per buffer, its footprint when
    that is small (a table every group reads stays in L2), else each group's distinct
    64-byte segments."""
    buffers = counters.get("buffers")
    if not buffers:
        return float(counters.get("global_load_group_segments64", 0)) * 64
    total = 0.0
    for b in buffers.values():
        footprint = b["read_sectors"] * 32
        total += footprint if footprint <= chip.l2_bytes * HOT_SHARE else \
            b["group_read_segments64"] * 64
    return total


def _compute(counters: dict, chip: ChipParams, ops_per_access: float) -> float:
    """Seconds of arithmetic: with counted operations (``ops_<class>``, runners/opcount.py)
    the larger of issuing every lane operation and memory access at the issue rate and the
    busiest class at its own rate; else the estimate of lane accesses x (1 + operations per
    access) at the fp32 rate."""
    clocks = chip.cores * chip.clock_hz
    accesses = float(counters.get("lane_accesses", 0.0))
    if not any(k.startswith("ops_") for k in counters):
        return accesses * (1 + ops_per_access) / (clocks * chip.lanes_per_core_clock)
    ops = {k[4:]: float(v) for k, v in counters.items() if k.startswith("ops_")}
    issue = (sum(ops.values()) + accesses) / (clocks * chip.lanes_per_core_clock)
    pipes = max(n / (clocks * chip.rate(cls)) for cls, n in ops.items())
    return max(issue, pipes)


def occupancy(launch: Launch, shared_bytes: float, chip: ChipParams) -> tuple[int, float]:
    """(resident groups per core, resident threads / the core's maximum)."""
    per_core = min(chip.max_groups_per_core,
                   chip.max_threads_per_core // max(1, launch.threads_per_group))
    if shared_bytes:
        per_core = min(per_core, int(chip.shared_bytes_per_core // shared_bytes))
    per_core = max(1, per_core)
    return per_core, per_core * launch.threads_per_group / chip.max_threads_per_core


def predict(counters: dict[str, float], launch: Launch, chip: ChipParams,
            ops_per_access: float = 1.0) -> Prediction:
    """Predicted seconds of one launch and the time of each resource (see the module doc)."""
    c = lambda k: float(counters.get(k, 0.0))  # noqa: E731
    notes = []
    per_core, occ = occupancy(launch, c("shared_bytes_per_group"), chip)
    waves = launch.groups / (per_core * chip.cores)
    tail = math.ceil(waves) / waves if waves > 0 else 1.0  # the last, partial wave
    resident_groups = min(launch.groups, per_core * chip.cores)
    warps = resident_groups * math.ceil(launch.threads_per_group / chip.simd_width)
    sectors = c("global_load_sectors") + c("global_store_sectors")
    instr = c("global_load_instructions") + c("global_store_instructions")
    footprint = c("footprint_sectors") * 32
    if footprint <= chip.l2_bytes:
        dram = footprint  # everything stays in L2 after its first touch
    else:  # reads: each group's distinct 64-byte segments; a partly written sector is read first
        partial = c("global_store_partial_sectors")
        dram = _dram_reads(counters, chip) + (c("global_store_group_sectors") + partial) * 32
    # Little's law: bytes in flight per warp = its instruction's sectors x independent loads
    warp_instr = instr / max(1.0, c("groups") * math.ceil(launch.threads_per_group / 32))
    ilp = min(4.0, max(1.0, warp_instr))
    per_instr = sectors * 32 / instr if instr else 128.0
    inflight_bw = warps * per_instr * ilp / chip.memory_latency_s
    bw = min(chip.bandwidth_Bps * chip.dram_efficiency, inflight_bw)
    if inflight_bw < chip.bandwidth_Bps * chip.dram_efficiency:
        notes.append(f"too few loads in flight for full bandwidth ({occ:.0%} occupancy)")
    lane_rate = chip.cores * chip.lanes_per_core_clock * chip.clock_hz
    atom_ops = c("global_atomic_ops") + c("shared_atomic_ops")
    contention = c("global_atomic_ops") / max(1.0, c("atomic_addresses"))
    terms = {
        "dram": dram / bw * tail,
        "l2": sectors * 32 / chip.l2_Bps,
        "shared": (c("shared_load_wavefronts") + c("shared_store_wavefronts"))
        / (chip.cores * chip.clock_hz) * tail,
        "compute": _compute(counters, chip, ops_per_access) * tail,
        "atomics": max(atom_ops / lane_rate * 32,
                       contention * chip.same_address_atomic_s if c("atomic_addresses") else 0),
        "sync": (c("barrier_arrivals") / 32 * BARRIER_CLOCKS + c("collective_arrivals") / 32)
        / (chip.cores * chip.clock_hz),
        "groups": launch.groups / chip.cores * chip.group_launch_s,
    }
    bottleneck = max(terms, key=terms.get)
    rest = sum(v for k, v in terms.items() if k != bottleneck)
    total = chip.launch_overhead_s + terms[bottleneck] + OVERLAP * rest
    return Prediction(total, bottleneck, terms, occ, dram, notes)
