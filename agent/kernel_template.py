"""The runtime of a generated ``kernel.py`` (agent/package.py copies this file and fills in the
port-data block): ``run(**kwargs) -> dict[str, mx.array]`` through ``mx.fast.metal_kernel``
on Apple Silicon, or kport's metal_sim drop-in elsewhere. It needs only numpy and MLX on a Mac.
"""

from __future__ import annotations

import functools

import numpy as np

# --- kport: port data ---
KERNEL = "kernel"
BODY = ""
HEADER = ""
SPEC: dict = {"params": [], "args": {}, "sizes": [], "size_args": {}, "inputs": [],
              "outputs": [], "out_args": {}, "grid": [1, 1, 1], "threadgroup": [1, 1, 1],
              "template": {}, "atomic_outputs": False, "init_value": None, "names": {}}
# --- kport: end of port data ---

STORAGE = {"float32": "float32", "float16": "float16", "bfloat16": "uint16", "bool": "bool",
           "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
           "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64"}
# --- kport: size evaluator ---
# kport's one size evaluator (runners/sizeexpr.py); agent/package.py puts its text here, so
# kernel.py runs on a Mac where kport is not installed.
from runners.sizeexpr import SizeExprError, evaluate  # noqa: E402
from runners.structs import struct_bytes  # noqa: E402

# --- kport: end of size evaluator ---


@functools.cache
def kernel():
    """The metal_kernel object: MLX's on Apple Silicon, kport's simulator elsewhere."""
    import mlx.core as mx

    if mx.metal.is_available():
        make = mx.fast.metal_kernel
    else:
        try:
            from runners.metal_sim import metal_kernel as make
        except ImportError:
            raise RuntimeError("no Metal GPU here and kport's simulator is not importable: "
                               "run on Apple Silicon, or install kport") from None
    # an argument Metal cannot name as CUDA does (`kernel`) has the port's name there
    metal = SPEC["names"]
    return make(name=KERNEL, input_names=[metal.get(n, n) for n in SPEC["inputs"]],
                output_names=[metal.get(n, n) for n in SPEC["outputs"]], source=BODY,
                header=HEADER, atomic_outputs=SPEC["atomic_outputs"])


def _mx_dtype(dtype: str):
    """The MLX dtype of a dtype name (MLX spells bool ``bool_``)."""
    import mlx.core as mx

    return mx.bool_ if dtype == "bool" else getattr(mx, dtype)


def _array(name: str, value, dtype: str):
    import mlx.core as mx

    if isinstance(value, np.ndarray):
        if dtype == "bfloat16" and value.dtype == np.uint16:  # bfloat16 as bit patterns
            return mx.array(value).view(mx.bfloat16)
        if value.dtype != np.dtype(STORAGE[dtype]):
            raise TypeError(f"{name}: expected {dtype}, got numpy {value.dtype}; convert it "
                            "first")
        return mx.array(value)
    if not isinstance(value, mx.array):
        raise TypeError(f"{name}: expected an mx.array or numpy array of {dtype}, got "
                        f"{type(value).__name__}")
    if value.dtype != _mx_dtype(dtype):
        raise TypeError(f"{name}: expected {dtype}, got {value.dtype}; convert it first")
    return value


def _scalar(name: str, value, dtype: str):
    import mlx.core as mx

    if isinstance(value, (mx.array, np.ndarray)):
        if value.size != 1:
            raise ValueError(f"{name}: a scalar argument, got shape {tuple(value.shape)}")
        value = value.item()
    if dtype.startswith(("int", "uint")) and float(value) != int(value):
        raise TypeError(f"{name}: expected an integer ({dtype}), got {value!r}")
    return mx.array(int(value) if dtype.startswith(("int", "uint")) else value,
                    dtype=_mx_dtype(dtype))


def _unpack(kwargs: dict) -> dict:
    """run()'s arguments with each struct's pointer fields taken out as arguments of their own
    (the SPEC args whose ``field`` names them, STRUCT.FIELD): a field given None or left out
    is nullptr; an output field's array is not read (MLX outputs are fresh arrays)."""
    out = dict(kwargs)
    for name, a in SPEC["args"].items():
        struct, _, path = a.get("field", "").partition(".")
        if not path or not isinstance(out.get(struct), dict) or path not in out[struct]:
            continue
        value = out[struct][path]
        out[struct] = {k: v for k, v in out[struct].items() if k != path}
        if a["role"] != "out" and value is not None:
            out[name] = value
    return out


def _label(name: str) -> str:
    """How run() names an argument to its caller: a struct's pointer field as params['x']."""
    struct, _, path = SPEC["args"].get(name, {}).get("field", "").partition(".")
    return f"{struct}[{path!r}]" if path else name


def _bind(kwargs: dict) -> tuple[dict, dict]:
    """(kernel inputs by CUDA name, size values) from run()'s arguments; raises TypeError for a
    missing/unknown argument or dtype, ValueError for a shape that does not fit."""
    args, sizes, values = SPEC["args"], {}, {}
    allowed = {n for n, a in args.items() if a["role"] != "out"} | set(SPEC["size_args"].values())
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise TypeError(f"run() got unknown argument {unknown[0]!r}; it takes "
                        f"{', '.join(sorted(allowed))}")
    for sym, kw in SPEC["size_args"].items():
        if kw not in kwargs:
            raise TypeError(f"run() needs {kw}= (a size the arrays do not show)")
        sizes[sym] = int(kwargs[kw])
    for name, a in args.items():  # what a struct's fields give comes first: a flat input
        if a.get("fields") and isinstance(kwargs.get(name), dict):  # may be longer than
            _learn(name, a["fields"], kwargs[name], sizes)  # the size its length suggests
    for name, a in args.items():
        if a["role"] not in ("in", "inout") or a.get("fields"):
            continue
        if kwargs.get(name) is None and f"KP_HAS_{name}" in SPEC["template"]:
            # an optional input the kernel tests against null: absent (run()'s KP_HAS_ flag
            # says so; 8 zeros stand in, as MLX passes no null buffers)
            values[name] = np.zeros(8, STORAGE[a["dtype"]])
            continue
        if name not in kwargs:
            raise TypeError(f"run() missing array argument {_label(name)}")
        arr = values[name] = _array(_label(name), kwargs[name], a["dtype"])
        if arr.ndim != len(a["shape"]):
            raise ValueError(f"{name}: expected {len(a['shape'])} dimensions {a['shape']}, "
                             f"got shape {tuple(arr.shape)}")
        for expr, dim in zip(a["shape"], arr.shape, strict=True):
            if a["role"] == "in" and arr.ndim == 1 and expr in sizes:
                continue  # a flat input's first elements are read: checked below
            if isinstance(expr, str) and expr in SPEC["sizes"]:
                if sizes.setdefault(expr, dim) != dim:
                    raise ValueError(f"{name}: dimension {expr} is {dim}, but {expr}="
                                     f"{sizes[expr]} elsewhere")
    for name, a in args.items():  # a struct by value: a dict of its fields (or its bytes)
        if a.get("fields"):
            values[name] = _struct(name, a, kwargs.get(name, {}), sizes)
    for name, a in args.items():
        if a["role"] != "scalar":
            continue
        sym = a["value"] if a["value"] in SPEC["sizes"] else None
        if name in kwargs:
            given = kwargs[name]
            if sym is not None and sizes.setdefault(sym, int(given)) != int(given):
                raise ValueError(f"{name}={given} but the arrays give {sym}={sizes[sym]}")
        elif sym is not None and sym in sizes:
            given = sizes[sym]
        elif a.get("default"):  # left out: its C++ default
            given = a["value"]
        elif isinstance(a["value"], str) and sym is None:  # derived from sizes (`nb01 // 4`)
            try:
                given = evaluate(a["value"], sizes)
            except SizeExprError:
                raise TypeError(f"run() missing scalar argument {name!r} ({a['dtype']}; or the "
                                f"sizes {a['value']!r} is computed from)") from None
        else:
            raise TypeError(f"run() missing scalar argument {name!r} ({a['dtype']})")
        values[name] = _scalar(name, given, a["dtype"])
    for name, arr in values.items():
        a = args[name]
        if kwargs.get(name) is None and f"KP_HAS_{name}" in SPEC["template"]:
            continue
        if a.get("shape_guessed"):  # no measured extent to hold the caller's array to
            continue
        if a["role"] in ("in", "inout") and arr.ndim == 1:  # a kernel reads (and updates) a
            want = int(evaluate(a["shape"][0], sizes))  # flat buffer's first elements: a longer
            if arr.shape[0] < want:  # one is fine (an in-place one comes back whole)
                raise ValueError(f"{name}: expected at least {want} elements {a['shape']} at "
                                 f"sizes {sizes}, got {arr.shape[0]}")
        elif a["role"] in ("in", "inout"):
            want = tuple(int(evaluate(e, sizes)) for e in a["shape"])
            if tuple(arr.shape) != want:
                raise ValueError(f"{name}: expected shape {want} {a['shape']} at sizes "
                                 f"{sizes}, got {tuple(arr.shape)}")
    return values, sizes


def _learn(name: str, fields: list, values, sizes: dict) -> None:
    """The sizes a struct's fields named like them give (ValueError on a disagreement). A
    stride field (``x_c_stride``) gives none: a caller's layout may differ from the contiguous
    one the port was checked with (a view; mamba's B with its groups outside dstate)."""
    for f in fields:
        if f.get("fields"):
            _learn(name, f["fields"], values.get(f["name"], {}) if isinstance(values, dict)
                   else {}, sizes)
        elif isinstance(values, dict) and f["name"] in values and \
                f.get("value") in SPEC["sizes"] and not f["name"].endswith("_stride"):
            v = int(values[f["name"]])
            if sizes.setdefault(f["value"], v) != v:
                raise ValueError(f"{name}.{f['name']}={v} but {f['value']}="
                                 f"{sizes[f['value']]} elsewhere")


def _struct(name: str, a: dict, given, sizes: dict):
    """A struct argument's bytes: ``given`` (a dict of fields, nested dicts for nested structs;
    a field left out takes the port's value for it) or its bytes as an array. A field whose
    value is a size name gives that size."""
    if not isinstance(given, dict):
        return _array(name, given, "uint8")

    def value_of(expr, where):
        try:
            return evaluate(expr, sizes)
        except SizeExprError:
            raise TypeError(f"run(): {name}['{where}'] is needed (its value {expr!r} names a "
                            "size nothing else gives)") from None

    _learn(name, a["fields"], given, sizes)
    try:
        return struct_bytes(a["fields"], given, value_of)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None


def _device(value):
    """A 1-D input of fewer than 8 elements padded to 8: MLX passes a smaller one in the
    `constant` address space, where the port's `device` pointers (its helper functions take
    them) cannot point. The kernel reads only the elements it was given."""
    import mlx.core as mx

    if isinstance(value, mx.array) and value.ndim == 1 and value.size < 8:
        return mx.concatenate([value, mx.zeros((8 - value.size,), value.dtype)])
    return value


def run(**kwargs) -> dict:
    """Run the port: every in/inout/scalar argument by its CUDA name (plus any size in
    SPEC["size_args"]), a struct as a dict of its fields (arrays for pointer fields); returns
    every out/inout argument by its CUDA name (STRUCT.FIELD for a struct's) as an mx.array.
    Raises TypeError/ValueError for missing, unknown or mis-shaped arguments."""
    kwargs = _unpack(kwargs)
    values, sizes = _bind(kwargs)
    args = SPEC["args"]
    outs = [args[SPEC["out_args"][o]] for o in SPEC["outputs"]]
    template = [(k, kwargs.get(k.removeprefix("KP_HAS_")) is not None
                 if k.startswith("KP_HAS_") and isinstance(v, bool)
                 else _mx_dtype(v) if isinstance(v, str) and v in STORAGE
                 else int(evaluate(v, sizes)) if isinstance(v, str) else v)
                for k, v in SPEC["template"].items()]
    extra = {"template": template} if template else {}
    if SPEC["init_value"] is not None:
        extra["init_value"] = SPEC["init_value"]
    call = dict(
        inputs=[_device(values[n]) for n in SPEC["inputs"]],
        output_shapes=[tuple(values[SPEC["out_args"][o]].shape) if a["role"] == "inout"
                       else tuple(int(evaluate(e, sizes)) for e in a["shape"])
                       for o, a in zip(SPEC["outputs"], outs, strict=True)],
        output_dtypes=[_mx_dtype(a["dtype"]) for a in outs],
        grid=tuple(int(evaluate(e, sizes)) for e in SPEC["grid"]),
        threadgroup=tuple(int(evaluate(e, sizes)) for e in SPEC["threadgroup"]), **extra)
    inplace = [i for i, a in enumerate(outs) if a["role"] == "inout"]
    if inplace and not SPEC["atomic_outputs"] and SPEC["init_value"] is None:
        results = _in_place(call, {i: values[SPEC["out_args"][SPEC["outputs"][i]]]
                                   for i in inplace})
    else:
        results = kernel()(**call)
    return {args[SPEC["out_args"][o]].get("field") or SPEC["out_args"][o]: r
            for o, r in zip(SPEC["outputs"], results, strict=True)}


def _in_place(call: dict, given: dict) -> list:
    """The outputs of a kernel that updates arrays in place: MLX's outputs are fresh arrays,
    so the elements the kernel leaves alone (gaps: vLLM's rotary embedding rotates the first
    rot_dim of each head) would be garbage. The kernel runs twice, its outputs starting as 0
    and as 1: an element equal, bit for bit, in both runs was written; any other keeps the
    caller's value (docs/translate.md "In-place arrays")."""
    import mlx.core as mx

    zero, one = kernel()(**call, init_value=0), kernel()(**call, init_value=1)
    out = list(zero)
    for i in given:  # the in-place outputs, by index: the caller's arrays
        bits = {1: mx.uint8, 2: mx.uint16, 4: mx.uint32, 8: mx.uint64}[zero[i].dtype.size]
        written = zero[i].view(bits) == one[i].view(bits)
        out[i] = mx.where(written, zero[i], mx.array(given[i]).reshape(zero[i].shape))
    return out


def as_numpy(name: str, value) -> np.ndarray:
    """An argument's values as a float64/int numpy array (bfloat16 decoded), for comparisons."""
    import mlx.core as mx

    dtype = next(a["dtype"] for n, a in SPEC["args"].items() if name in (n, a.get("field")))
    if isinstance(value, mx.array) and value.dtype == mx.bfloat16:
        value = np.array(value.view(mx.uint16))
    value = np.asarray(value)
    if dtype == "bfloat16":
        return (value.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return value.astype(np.float64) if value.dtype.kind == "f" else value
