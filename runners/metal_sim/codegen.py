"""The exact kernel text `mx.fast.metal_kernel` (MLX 0.32) generates, and the C++ TU we build.

Mirrors mlx/backend/common/metal_kernel.cpp as described in
shared/reference/mlx-metal-kernel.md §1.2 — including its quirks: substring matching of
``<input>_shape``/``_strides``/``_ndim`` and of attribute names in ``source`` (never ``header``),
``constant`` for inputs of fewer than 8 elements, 0-d inputs by reference, and the comma test
that miscloses the signature when shape buffers exist, no attribute is used and there are two
or more outputs (we reproduce it, so the compile fails as it would on a Mac).
"""

from __future__ import annotations

from dataclasses import dataclass

from runners.dtypes import DTYPES, Tensor

# MLX's attribute table, in its order (alphabetical).
ATTRIBUTES = (
    ("dispatch_quadgroups_per_threadgroup", "uint"),
    ("dispatch_simdgroups_per_threadgroup", "uint"),
    ("dispatch_threads_per_threadgroup", "uint3"),
    ("grid_origin", "uint3"),
    ("grid_size", "uint3"),
    ("quadgroup_index_in_threadgroup", "uint"),
    ("quadgroups_per_threadgroup", "uint"),
    ("simdgroup_index_in_threadgroup", "uint"),
    ("simdgroups_per_threadgroup", "uint"),
    ("thread_execution_width", "uint"),
    ("thread_index_in_quadgroup", "uint"),
    ("thread_index_in_simdgroup", "uint"),
    ("thread_index_in_threadgroup", "uint"),
    ("thread_position_in_grid", "uint3"),
    ("thread_position_in_threadgroup", "uint3"),
    ("threadgroup_position_in_grid", "uint3"),
    ("threadgroups_per_grid", "uint3"),
    ("threads_per_grid", "uint3"),
    ("threads_per_simdgroup", "uint"),
    ("threads_per_threadgroup", "uint3"),
)
MAX_CONSTANT_ARRAY_SIZE = 8

# How each attribute is computed from the runtime's __kp_thread `__kp_t` (C++ expressions).
_V3 = "uint3{{{0}[0], {0}[1], {0}[2]}}"
ATTRIBUTE_VALUES = {
    "dispatch_quadgroups_per_threadgroup": "(__kp_dispatch_threads(__kp_t) + 3) / 4",
    "dispatch_simdgroups_per_threadgroup": "(__kp_dispatch_threads(__kp_t) + 31) / 32",
    "dispatch_threads_per_threadgroup": _V3.format("__kp_t->tg_dispatch"),
    "grid_origin": "uint3{0, 0, 0}",  # unconfirmed: stage-in attribute; 0 for plain dispatches
    "grid_size": _V3.format("__kp_t->grid"),  # unconfirmed, as above
    "quadgroup_index_in_threadgroup": "__kp_t->linear / 4",
    "quadgroups_per_threadgroup": "(__kp_actual_threads(__kp_t) + 3) / 4",
    "simdgroup_index_in_threadgroup": "__kp_t->simd",
    "simdgroups_per_threadgroup": "__kp_t->nsimd",
    "thread_execution_width": "32u",
    "thread_index_in_quadgroup": "__kp_t->linear % 4",
    "thread_index_in_simdgroup": "__kp_t->lane",
    "thread_index_in_threadgroup": "__kp_t->linear",
    "thread_position_in_grid": ("uint3{__kp_t->gid[0] * __kp_t->tg_dispatch[0] + __kp_t->tid[0], "
                                "__kp_t->gid[1] * __kp_t->tg_dispatch[1] + __kp_t->tid[1], "
                                "__kp_t->gid[2] * __kp_t->tg_dispatch[2] + __kp_t->tid[2]}"),
    "thread_position_in_threadgroup": _V3.format("__kp_t->tid"),
    "threadgroup_position_in_grid": _V3.format("__kp_t->gid"),
    "threadgroups_per_grid": _V3.format("__kp_t->ngroups"),
    "threads_per_grid": _V3.format("__kp_t->grid"),
    "threads_per_simdgroup": "32u",
    "threads_per_threadgroup": _V3.format("__kp_t->tg_size"),
}


# C++ the attribute expressions above rely on; every Metal TU includes it after the shim.
ATTRIBUTE_HELPERS = """// `P`: the running thread's record, or a work-item's fields as a value.
template <class P> static inline uint __kp_actual_threads(P __kp_t) {
  return __kp_t->tg_size[0] * __kp_t->tg_size[1] * __kp_t->tg_size[2]; }
template <class P> static inline uint __kp_dispatch_threads(P __kp_t) {
  return __kp_t->tg_dispatch[0] * __kp_t->tg_dispatch[1] * __kp_t->tg_dispatch[2]; }
"""


@dataclass(frozen=True)
class Param:
    """One kernel parameter in buffer order: what it is and how the entry passes it."""

    name: str
    c_type: str  # element type spelling
    kind: str  # input | input_ref | shape | strides | ndim | output
    constant: bool = False


def used_attributes(source: str) -> list[tuple[str, str]]:
    return [(a, t) for a, t in ATTRIBUTES if a in source]


def shape_flags(source: str, name: str) -> tuple[bool, bool, bool]:
    return (f"{name}_shape" in source, f"{name}_strides" in source, f"{name}_ndim" in source)


def template_string(template: list[tuple[str, object]]) -> str:
    """MLX's write_template: ``<1, 3, float16_t>`` (bools print as 1/0)."""
    parts = []
    for _, value in template:
        if isinstance(value, bool):
            parts.append(str(int(value)))
        elif isinstance(value, int):
            parts.append(str(value))
        else:
            parts.append(value)  # already a type spelling
    return "<" + ", ".join(parts) + ">"


def kernel_name(name: str, template, inputs: list[Tensor], out_types: list[str]) -> str:
    """``custom_kernel_<name>[<template hash>]_<in types...>_<out types...>`` as MLX 0.32 names
    it (suffix ``s`` for 0-d inputs, ``c`` for constant-space ones)."""
    out = f"custom_kernel_{name}"
    if template:
        hashed = template_string(template).replace("<", "_").replace(">", "_").replace(", ", "_")
        out += "_" + hashed[:-1]  # MLX 0.32 joins with "_", hence "name__1_3_..."
    for t in inputs:
        suffix = "s" if t.ndim == 0 else ("c" if t.size < MAX_CONSTANT_ARRAY_SIZE else "")
        out += f"_{t.type_string}{suffix}"
    for ty in out_types:
        out += f"_{ty}"
    return out


def signature(func: str, header: str, source: str, input_names, inputs: list[Tensor],
              output_names, out_types: list[str], template, atomic_outputs: bool
              ) -> tuple[str, list[Param]]:
    """The text of MLX's write_signature (header + signature + source + closing) and the
    parameters in buffer order."""
    text = header
    params: list[Param] = []
    if template:
        kinds = []
        for tname, value in template:
            kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else (
                "typename")
            kinds.append(f"{kind} {tname}")
        text += "template <" + ", ".join(kinds) + ">\n"
    text += f"[[kernel]] void {func}(\n"
    index = 0
    for name, t in zip(input_names, inputs, strict=True):
        location = "constant" if t.size < MAX_CONSTANT_ARRAY_SIZE else "device"
        ref = "&" if t.ndim == 0 else "*"
        text += f"  const {location} {t.type_string}{ref} {name} [[buffer({index})]],\n"
        params.append(Param(name, t.type_string, "input_ref" if ref == "&" else "input",
                            location == "constant"))
        index += 1
        if t.ndim > 0:
            has_shape, has_strides, has_ndim = shape_flags(source, name)
            if has_shape:
                text += f"  const constant int* {name}_shape [[buffer({index})]],\n"
                params.append(Param(f"{name}_shape", "int", "shape", True))
                index += 1
            if has_strides:
                text += f"  const constant int64_t* {name}_strides [[buffer({index})]],\n"
                params.append(Param(f"{name}_strides", "int64_t", "strides", True))
                index += 1
            if has_ndim:
                text += f"  const constant int& {name}_ndim [[buffer({index})]],\n"
                params.append(Param(f"{name}_ndim", "int", "ndim", True))
                index += 1
    attributes = used_attributes(source)
    for name, ty in zip(output_names, out_types, strict=True):
        elem = f"atomic<{ty}>" if atomic_outputs else ty
        text += f"  device {elem}* {name} [[buffer({index})]]"
        # MLX's test counts shape buffers in `index` (the quirk in the module docstring).
        if index < len(inputs) + len(output_names) - 1 or attributes:
            text += ",\n"
        else:
            text += ") {\n"
        params.append(Param(name, elem, "output"))
        index += 1
    for i, (attr, ty) in enumerate(attributes):
        text += f"  {ty} {attr} [[{attr}]]"
        text += ",\n" if i < len(attributes) - 1 else ") {\n"
    text += source + "\n}\n"
    return text, params


def instantiation(func: str, template) -> str:
    """The explicit instantiation MLX appends for template kernels."""
    if not template:
        return ""
    full = func + template_string(template)
    return (f'\ntemplate [[host_name("{func}")]] [[kernel]] decltype({full}) {full};\n')


def dtype_spelling(name: str) -> str:
    return DTYPES[name][1]
