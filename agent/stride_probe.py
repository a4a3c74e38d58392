"""Stride fields of a parameters struct, measured (issue 15). causal-conv1d's
``ConvParamsBase`` and mamba's ``SSMParamsBase`` describe each array by a pointer field and
strides, ``x_ptr`` with ``x_batch_stride``, ``x_c_stride``, ``x_l_stride``; the kernel indexes
``x_ptr[b * x_batch_stride + c * x_c_stride + l * x_l_stride]``. A guessed value of 1 for every
stride makes the rows of every array overlap, and threads then write the same elements: the
oracle's results depend on the order threads run in. Contiguous strides are what a caller
passes for a fresh tensor, and they follow from how far the kernel indexes each dimension.

So for each group of fields ``P_D_stride`` (declaration order: outermost first, as the structs
declare them) whose array is the pointer field ``P_ptr`` (or ``P``), the kernel runs in cuda_sim
once per member with that stride 1 and the group's others 0: the array's access extent is then
how far the kernel indexes that dimension. The innermost stride is 1 and each outer one the
product of the extents inside it; an extent that equals exactly one given size is written as
that size (one no size equals, as a constant: a kernel's fixed width), so the strides follow the
sizes (``x_c_stride = seqlen``, ``x_batch_stride = dim * seqlen``). A kernel that reads its
rows whole without the innermost stride (causal-conv1d's forward kernel loads ``x`` in chunks,
never reading ``x_l_stride``) reads a row's elements in every run: one more run with all the
group's strides 0 measures that row, which is then the innermost dimension's extent, and a
stride's run counts only what it adds beyond it (else ``x_batch_stride`` became ``(dim - 1 +
seqlen) * seqlen``). The row is innermost even when no stride field names it: mamba's ``u``
has ``u_batch_stride`` and ``u_d_stride`` and contiguous rows (``u_d_stride = seqlen``, not 1).
A stride whose run adds nothing indexes nothing in this instantiation and keeps its value
(the row's own, declared last, takes 1). A dimension the kernel never indexes at all leaves the
group as it was.

An in-place array whose rows leave gaps is still a limit: elements no thread writes keep their
values in CUDA, but an MLX output is fresh, so contiguous strides matter for the port too.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable

from agent.shape_probe import ArgProbe, extents_runner

_STRIDE = re.compile(r"^(?P<prefix>[A-Za-z]\w*?)_(?P<dim>[A-Za-z0-9]+)_stride$")
_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def stride_groups(fields: list[dict]) -> dict[str, list[str]]:
    """Integer fields named PREFIX_DIM_stride, by prefix, in declaration order."""
    groups: dict[str, list[str]] = {}
    for f in fields:
        m = _STRIDE.match(f["name"])
        if m and f.get("dtype") in _INTS and f.get("count", 1) == 1:
            groups.setdefault(m["prefix"], []).append(f["name"])
    return {p: names for p, names in groups.items() if len(names) >= 2}


def measure_strides(code: str, kernel: str, filename: str, args: list[dict], sizes: dict,
                    launch: Callable[[dict], tuple[list, list, int]]) -> dict[str, dict]:
    """For each struct argument of ``args`` (case dicts), its stride fields' contiguous values
    (field name -> size expression or number), measured as the module docstring says; fields
    whose dimension the kernel does not index are left out."""
    out: dict[str, dict] = {}
    runner = None  # one for all the runs: one kernel build, one run budget
    for s in (a for a in args if a.get("fields")):
        groups = stride_groups(s["fields"])
        arrays = {a.get("field", "").partition(".")[2]: a["name"] for a in args
                  if a.get("field", "").partition(".")[0] == s["name"]}
        for prefix, members in groups.items():
            array = arrays.get(f"{prefix}_ptr") or arrays.get(prefix)
            if array is None:
                continue
            extents = []
            for member in [None, *members]:  # None: every stride 0 (the base run)
                probe = _with_values(args, s["name"], {m: int(m == member) for m in members})
                runner = runner or extents_runner(code, kernel, filename, probe, launch)
                runner.args = probe
                got = runner.extents(sizes)
                extents.append(got.get(array, 0) if got else 0)
            if min(extents) < 1:
                continue  # a dimension it does not index (or a run that failed)
            out.setdefault(s["name"], {}).update(_layout(members, extents[0], extents[1:],
                                                         sizes))
    return out


def _layout(members: list[str], base: int, extents: list[int], sizes: dict
            ) -> dict[str, int | str]:
    """Contiguous values for the stride fields ``members`` (outermost first) from the access
    extents with each stride 1 alone (``extents``) and with all of them 0 (``base``). What the
    kernel reads without any stride (a row read whole, ``x + chunk * 512``) is the innermost
    dimension, of ``base`` elements; a stride whose run adds nothing beyond it indexes nothing
    in this instantiation (causal-conv1d's ``x_l_stride``, the row's own stride when declared
    last, takes 1; another keeps its value: mamba's ``B_group_stride`` times group 0), and
    each one that does counts what it adds. Without such a row (``base`` 1) the last stride
    that indexes is the innermost, its extent its count."""
    counts = {m: e - base + 1 for m, e in zip(members, extents, strict=True) if e > base}
    inner = [base] if base > 1 or not counts else []
    values: dict[str, int | str] = {}
    if base > 1 and members[-1] not in counts:
        values[members[-1]] = 1  # the row's own stride (one the kernel does not read)
    stride = base if base > 1 else 1
    if base <= 1 and counts:  # the last stride that indexes is the innermost: its own extent
        last = [m for m in members if m in counts][-1]
        counts[last] = extents[members.index(last)]
    for member in reversed([m for m in members if m in counts]):
        values[member] = _as_sizes(stride, inner, sizes)
        stride *= counts[member]
        inner = [counts[member], *inner]
    return values


def _with_values(args: list[dict], struct: str, values: dict[str, int]) -> list[ArgProbe]:
    """The probe's arguments with the struct's fields ``values`` set (the rest as cased)."""
    out = []
    for a in args:
        fields = a.get("fields")
        if a["name"] == struct:
            fields = copy.deepcopy(fields)
            for f in fields:
                if f["name"] in values:
                    f["value"] = values[f["name"]]
        out.append(ArgProbe(a["name"], a["role"], a["dtype"], a.get("value"), fields,
                            a.get("null", False), a.get("field", ""),
                            offsets=a.get("init", "").partition("offsets:")[2]))
    return out


def _as_sizes(value: int, inner: list[int], sizes: dict) -> int | str:
    """``value`` (the product of the ``inner`` extents) as a product of the sizes each extent
    equals (a constant where none does: a kernel's fixed width); the number itself when an
    extent equals several sizes (which one it follows is unknown)."""
    names = []
    for extent in inner:
        same = [n for n, v in sizes.items() if v == extent]
        if len(same) > 1:
            return value
        names.append(same[0] if same else str(extent))
    if not names or all(n.isdigit() for n in names):
        return value
    return " * ".join(names)
