"""Element types shared by the runners: names, numpy storage, MLX type spellings.

numpy has no bfloat16, so bfloat16 data is carried as uint16 bit patterns with the name
"bfloat16" alongside (``Tensor``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# name -> (numpy storage dtype, MLX get_type_string spelling)
DTYPES: dict[str, tuple[str, str]] = {
    "float32": ("float32", "float"),
    "float16": ("float16", "float16_t"),
    "bfloat16": ("uint16", "bfloat16_t"),
    "float64": ("float64", "double"),
    "bool": ("bool", "bool"),
    "int8": ("int8", "int8_t"),
    "int16": ("int16", "int16_t"),
    "int32": ("int32", "int32_t"),
    "int64": ("int64", "int64_t"),
    "uint8": ("uint8", "uint8_t"),
    "uint16": ("uint16", "uint16_t"),
    "uint32": ("uint32", "uint32_t"),
    "uint64": ("uint64", "uint64_t"),
    "complex64": ("complex64", "complex64_t"),
}


@dataclass
class Tensor:
    """An array as the runners see it: raw storage plus the logical dtype name.

    ``view`` is set for a strided view kept as it is (MLX's ensure_row_contiguous=False):
    (shape, strides in elements); ``data`` then holds the memory span the view covers."""

    data: np.ndarray
    dtype: str
    view: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    @property
    def type_string(self) -> str:
        return DTYPES[self.dtype][1]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.view[0] if self.view else self.data.shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements."""
        if self.view:
            return self.view[1]
        return tuple(s // max(self.data.itemsize, 1) for s in self.data.strides)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def known_dtype(name: str) -> str:
    """``name`` when it is a dtype kport knows; ValueError naming the known ones otherwise (for
    pydantic validators of case, rule and fix files)."""
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; one of {', '.join(DTYPES)}")
    return name


def strided_view(a: np.ndarray, name: str) -> Tensor:
    """A non-contiguous numpy view as MLX passes it with ensure_row_contiguous=False: the memory
    it spans, from its first element, and its strides (0 for broadcast dimensions)."""
    if a.flags.c_contiguous or a.size == 0 or any(s < 0 or s % a.itemsize for s in a.strides):
        return Tensor(_contiguous(a), name)  # negative/odd strides: MLX has none; copy
    span = 1 + sum((n - 1) * (s // a.itemsize) for n, s in zip(a.shape, a.strides, strict=True))
    memory = np.lib.stride_tricks.as_strided(a, shape=(span,), strides=(a.itemsize,)).copy()
    return Tensor(memory, name, (a.shape, tuple(s // a.itemsize for s in a.strides)))


def dtype_name(dtype) -> str:
    """Name of an mx.Dtype, numpy dtype or name string; raises ValueError for unknown ones."""
    text = str(dtype).removeprefix("mlx.core.")
    if text in DTYPES:
        return text
    try:
        text = np.dtype(dtype).name
    except TypeError as err:
        raise ValueError(f"unsupported dtype {dtype!r}; one of {', '.join(DTYPES)}") from err
    if text not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; one of {', '.join(DTYPES)}")
    return text


def to_tensor(value, keep_strides: bool = False) -> Tensor:
    """An mx.array, numpy array or Python scalar as a Tensor (Python scalars as MLX converts
    them: int -> int32, or int64 when out of range; float -> float32; bool -> bool).

    ``keep_strides``: a non-contiguous numpy view keeps its layout (see strided_view). mx.arrays
    expose no strides in Python, so they always arrive row-contiguous (a documented gap)."""
    if isinstance(value, bool):
        return Tensor(np.array(value, dtype=np.bool_), "bool")
    if isinstance(value, int):
        small = -(2**31) <= value < 2**31
        return Tensor(np.array(value, dtype=np.int32 if small else np.int64),
                      "int32" if small else "int64")
    if isinstance(value, float):
        return Tensor(np.array(value, dtype=np.float32), "float32")
    if isinstance(value, np.generic):  # a numpy scalar: a 0-d array of its own dtype
        return Tensor(np.asarray(value), dtype_name(value.dtype))
    if isinstance(value, np.ndarray):
        if keep_strides:
            return strided_view(value, dtype_name(value.dtype))
        return Tensor(_contiguous(value), dtype_name(value.dtype))
    if type(value).__module__.startswith("mlx"):
        import mlx.core as mx  # lazy: MLX is heavy; an mx.array input has loaded it already

        name = dtype_name(value.dtype)
        if name == "bfloat16":
            return Tensor(np.array(value.view(mx.uint16)), name)
        return Tensor(_contiguous(np.array(value)), name)
    raise TypeError(f"unsupported input of type {type(value).__name__}: pass an mx.array, a "
                    "numpy array or a Python scalar")


def _contiguous(a: np.ndarray) -> np.ndarray:
    """Row-contiguous, keeping 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)."""
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def mx_dtype(name: str):
    """The MLX dtype of a dtype name (MLX spells bool ``bool_``)."""
    import mlx.core as mx  # lazy: MLX is heavy (Metal on macOS); numpy-only callers skip it

    return mx.bool_ if name == "bool" else getattr(mx, name)


def to_mx(t: Tensor):
    """The Tensor as an mx.array of its logical dtype."""
    import mlx.core as mx  # lazy: MLX is heavy (Metal on macOS); numpy-only callers skip it

    if t.dtype == "bfloat16":
        return mx.array(t.data).view(mx.bfloat16)
    return mx.array(t.data)


def poison(shape, name: str, init_value: float | None) -> Tensor:
    """A fresh output: filled with init_value, else poisoned (NaN for floats, 0xBE bytes else)."""
    storage = np.dtype(DTYPES[name][0])
    if init_value is not None:
        if name == "bfloat16":
            bits = int(np.array([init_value], np.float32).view(np.uint32)[0])
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
            return Tensor(np.full(shape, rounded & 0xFFFF, np.uint16), name)
        return Tensor(np.full(shape, init_value, dtype=storage), name)
    if name in ("float32", "float16", "float64", "complex64"):
        return Tensor(np.full(shape, np.nan, dtype=storage), name)
    if name == "bfloat16":
        return Tensor(np.full(shape, 0x7FC1, np.uint16), name)  # a bfloat16 NaN
    return Tensor(np.frombuffer(b"\xbe" * (int(np.prod(shape)) * storage.itemsize),
                                storage).reshape(shape).copy(), name)
