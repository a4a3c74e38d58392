"""A C struct's bytes from its fields (issue 15: kernels that take a parameters struct by value,
llama.cpp's ``soft_max_params``). The struct travels as its bytes: to cuda_sim as the parameter
itself, to Metal as a uint8 buffer the port reads back as the struct. Both sides lay a struct
of scalars and fixed arrays out as C does (each field at its natural alignment, the size a
multiple of the largest), which is numpy's ``align=True``; fields whose layout differs
(3-vectors) are refused before a case is written (agent/translate/analyze.py).

A pointer field (dtype ``"pointer"``, 8 bytes, as on every 64-bit CUDA host) holds no value of
its own: cuda_sim writes the address of the array the field points at into the struct's bytes
(``WithPointers``), and the Metal port takes that array as a buffer of its own, so the bytes
the port reads keep a zero there.

A field is ``{"name", "dtype"}``, with ``"count"`` for an array and ``"fields"`` (and no
dtype) for a nested struct; ``"value"`` is a default. generated kernel.py files carry a copy of
this code.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

_FORMATS = {"float32": "<f4", "float16": "<f2", "bfloat16": "<u2", "bool": "?", "int8": "i1",
            "uint8": "u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4", "uint32": "<u4",
            "int64": "<i8", "uint64": "<u8", "pointer": "<u8"}
MIN_STRUCT_BUFFER = 8  # MLX passes an input of fewer elements in constant memory, not device


def struct_dtype(fields: list[dict]) -> np.dtype:
    """The numpy dtype with the C layout of a struct of ``fields``."""
    formats = []
    for f in fields:
        base = struct_dtype(f["fields"]) if f.get("fields") else np.dtype(_FORMATS[f["dtype"]])
        formats.append((base, (f["count"],)) if f.get("count", 1) > 1 else base)
    return np.dtype({"names": [f["name"] for f in fields], "formats": formats}, align=True)


def buffer_size(fields: list[dict]) -> int:
    """How many bytes the struct's buffer holds (its size, at least MIN_STRUCT_BUFFER)."""
    return max(struct_dtype(fields).itemsize, MIN_STRUCT_BUFFER)


def struct_bytes(fields: list[dict], values: dict, value_of) -> np.ndarray:
    """The struct as a uint8 array (at least MIN_STRUCT_BUFFER long): each field from
    ``values`` (a number, a list for an array, a dict for a nested struct) or else its own
    ``value``, each expression of it through ``value_of(expression, path)``. ValueError names
    a field that is unknown or does not fit."""
    record = np.zeros((), struct_dtype(fields))
    _fill(record, fields, values, value_of, "")
    raw = np.frombuffer(record.tobytes(), np.uint8)
    return np.concatenate([raw, np.zeros(max(0, MIN_STRUCT_BUFFER - raw.size), np.uint8)])


class WithPointers(NamedTuple):
    """A struct argument for cuda_sim whose pointer fields point at arrays: by field path
    ("x_ptr", "inner.y"), its byte offset in ``value`` and the array (None: nullptr). The
    arrays are updated in place, as array arguments are."""

    value: np.void
    arrays: dict[str, tuple[int, np.ndarray | None]]


def pointer_offsets(fields: list[dict]) -> dict[str, int]:
    """Each pointer field's path ("x_ptr", "inner.y") and byte offset in the struct."""
    out: dict[str, int] = {}

    def walk(fs: list[dict], base: int, path: str) -> None:
        dtype = struct_dtype(fs)
        for f in fs:
            offset = base + dtype.fields[f["name"]][1]
            if f.get("fields"):
                walk(f["fields"], offset, f"{path}{f['name']}.")
            elif f.get("dtype") == "pointer":
                out[f"{path}{f['name']}"] = offset

    walk(fields, 0, "")
    return out


def with_pointers(fields: list[dict], record: np.void,
                  arrays: dict[str, np.ndarray | None]) -> np.void | WithPointers:
    """The argument cuda_sim takes for a struct: the record itself, or with its pointer fields
    pointing at ``arrays`` (by field path; a field not there is nullptr)."""
    offsets = pointer_offsets(fields)
    if not offsets:
        return record
    return WithPointers(record, {path: (offset, arrays.get(path))
                                 for path, offset in offsets.items()})


def field_arrays(struct: str, args, arrays: dict) -> dict[str, np.ndarray | None]:
    """The arrays struct argument ``struct``'s pointer fields point at, by field: those of the
    arguments (each with ``name``, ``field`` "STRUCT.FIELD" and ``null``) that name them, from
    ``arrays`` by argument name (None for a null one)."""
    return {a.field.partition(".")[2]: None if a.null else arrays[a.name]
            for a in args if a.field.partition(".")[0] == struct}


def struct_value(fields: list[dict], data: np.ndarray) -> np.void:
    """The struct (a numpy record, as cuda_sim passes a parameter by value) from its bytes."""
    dtype = struct_dtype(fields)
    return np.frombuffer(np.ascontiguousarray(data, np.uint8)[:dtype.itemsize].tobytes(),
                         dtype)[0]


def _fill(record, fields: list[dict], values: dict, value_of, path: str) -> None:
    if not isinstance(values, dict):
        raise ValueError(f"{path or 'the struct'}: give a dict of its fields, got "
                         f"{type(values).__name__}")
    unknown = sorted(set(values) - {f["name"] for f in fields})
    if unknown:
        raise ValueError(f"{path}{unknown[0]}: no such field (fields: "
                         f"{', '.join(f['name'] for f in fields)})")
    for f in fields:
        where = f"{path}{f['name']}"
        if f.get("fields"):
            _fill(record[f["name"]], f["fields"], values.get(f["name"], {}), value_of,
                  where + ".")
            continue
        if f["dtype"] == "pointer":  # its address is no value here (WithPointers)
            continue
        if f["name"] in values:
            value = values[f["name"]]
        elif isinstance(f.get("value"), list):
            value = [value_of(v, where) for v in f["value"]]
        else:
            value = value_of(f.get("value"), where)
        count = f.get("count", 1)
        items = np.asarray(value, np.float64 if f["dtype"].startswith(("float", "bfloat"))
                           else object).reshape(-1)
        if items.size != count:
            raise ValueError(f"{where}: {count} value(s) expected, got {items.size}")
        if f["dtype"] == "bfloat16":
            bits = items.astype(np.float32).view(np.uint32).astype(np.uint64)
            items = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        try:
            cast = np.array(items.tolist(), dtype=_FORMATS[f["dtype"]])
        except (OverflowError, ValueError, TypeError):
            raise ValueError(f"{where}: {value!r} is not a {f['dtype']}") from None
        if f["dtype"] not in ("float32", "float16", "bfloat16", "bool") and not np.array_equal(
                cast.astype(object), np.asarray(items.tolist(), object)):
            raise ValueError(f"{where}: {value!r} is not a {f['dtype']}")
        record[f["name"]] = cast if count > 1 else cast[0]
