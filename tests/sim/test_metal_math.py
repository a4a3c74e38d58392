"""metal::, fast:: and precise:: math on float, half and vectors, against numpy within
tolerances. The functions of one group share one kernel (one output column per function), so a
group compiles once and every case launches it again from the build cache."""

import mlx.core as mx
import numpy as np
import pytest

from runners.metal_sim import metal_kernel

N = 32
RNG = np.random.default_rng(11)
X = RNG.uniform(0.1, 0.95, N).astype(np.float32)  # in the domain of log, sqrt, asin, pow base
Y = RNG.uniform(-4.0, 4.0, N).astype(np.float32)


def _round_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _smoothstep(e0, e1, v):
    t = np.clip((v - e0) / (e1 - e0), 0, 1)
    return t * t * (3 - 2 * t)


# name -> (expression in x and y, numpy of x and y)
FLOAT = {
    "exp": ("metal::exp(y)", lambda x, y: np.exp(y)),
    "exp2": ("metal::exp2(y)", lambda x, y: np.exp2(y)),
    "log": ("metal::log(x)", lambda x, y: np.log(x)),
    "log2": ("metal::log2(x)", lambda x, y: np.log2(x)),
    "log10": ("metal::log10(x)", lambda x, y: np.log10(x)),
    "log1p": ("metal::log1p(x)", lambda x, y: np.log1p(x)),
    "sqrt": ("metal::sqrt(x)", lambda x, y: np.sqrt(x)),
    "rsqrt": ("metal::rsqrt(x)", lambda x, y: 1 / np.sqrt(x)),
    "sin": ("metal::sin(y)", lambda x, y: np.sin(y)),
    "cos": ("metal::cos(y)", lambda x, y: np.cos(y)),
    "tan": ("metal::tan(x)", lambda x, y: np.tan(x)),
    "tanh": ("metal::tanh(y)", lambda x, y: np.tanh(y)),
    "asin": ("metal::asin(x)", lambda x, y: np.arcsin(x)),
    "atan2": ("metal::atan2(y, x)", lambda x, y: np.arctan2(y, x)),
    "pow": ("metal::pow(x, y)", lambda x, y: np.power(x, y)),
    "floor": ("metal::floor(y)", lambda x, y: np.floor(y)),
    "ceil": ("metal::ceil(y)", lambda x, y: np.ceil(y)),
    "round": ("metal::round(y * 2.0f)", lambda x, y: _round_away(y * 2)),
    "trunc": ("metal::trunc(y)", lambda x, y: np.trunc(y)),
    "fract": ("metal::fract(y)", lambda x, y: y - np.floor(y)),
    "fmod": ("metal::fmod(y, x)", lambda x, y: np.fmod(y, x)),
    "abs": ("metal::abs(y)", lambda x, y: np.abs(y)),
    "sign": ("metal::sign(y)", lambda x, y: np.sign(y)),
    "copysign": ("metal::copysign(x, y)", lambda x, y: np.copysign(x, y)),
    "fmin_fmax": ("metal::fmin(x, y) + 10.0f * metal::fmax(x, y)",
                  lambda x, y: np.minimum(x, y) + 10 * np.maximum(x, y)),
    "fma": ("metal::fma(x, y, x)", lambda x, y: x * y + x),
    "clamp": ("metal::clamp(y, -1.0f, 0.5f)", lambda x, y: np.clip(y, -1, 0.5)),
    "mix": ("metal::mix(x, y, 0.25f)", lambda x, y: x + (y - x) * 0.25),
    "select": ("metal::select(x, y, y > 0.0f)", lambda x, y: np.where(y > 0, y, x)),
    "step": ("metal::step(0.5f, y)", lambda x, y: (y >= 0.5).astype(np.float32)),
    "smoothstep": ("metal::smoothstep(-1.0f, 2.0f, y)", lambda x, y: _smoothstep(-1, 2, y)),
    "max3_median3": ("metal::max3(x, y, 0.3f) + 10.0f * metal::median3(x, y, 0.3f)",
                     lambda x, y: np.maximum(np.maximum(x, y), 0.3)
                     + 10 * np.median(np.stack([x, y, np.full_like(x, 0.3)]), axis=0)),
}
FAST = {name: (f"metal::fast::{name}({arg})", fn) for name, arg, fn in [
    ("exp", "y", lambda x, y: np.exp(y)),
    ("exp2", "y", lambda x, y: np.exp2(y)),
    ("log", "x", lambda x, y: np.log(x)),
    ("log2", "x", lambda x, y: np.log2(x)),
    ("sin", "y", lambda x, y: np.sin(y)),
    ("cos", "y", lambda x, y: np.cos(y)),
    ("tanh", "y", lambda x, y: np.tanh(y)),
    ("sqrt", "x", lambda x, y: np.sqrt(x)),
    ("rsqrt", "x", lambda x, y: 1 / np.sqrt(x)),
    ("pow", "x, y", lambda x, y: np.power(x, y)),
]}
PRECISE = {name: (f"metal::precise::{name}({arg})", fn) for name, arg, fn in [
    ("exp", "y", lambda x, y: np.exp(y)),
    ("sqrt", "x", lambda x, y: np.sqrt(x)),
    ("rsqrt", "x", lambda x, y: 1 / np.sqrt(x)),
    ("sin", "y", lambda x, y: np.sin(y)),
    ("cos", "y", lambda x, y: np.cos(y)),
    ("tan", "x", lambda x, y: np.tan(x)),
    ("tanh", "y", lambda x, y: np.tanh(y)),
    ("sinh", "y", lambda x, y: np.sinh(y)),
    ("cosh", "y", lambda x, y: np.cosh(y)),
]}
HALF = {  # x and y are half here; the expression's value is half
    "exp": ("metal::exp(y)", lambda x, y: np.exp(y)),
    "log": ("metal::log(x)", lambda x, y: np.log(x)),
    "sqrt": ("metal::sqrt(x)", lambda x, y: np.sqrt(x)),
    "rsqrt": ("metal::rsqrt(x)", lambda x, y: 1 / np.sqrt(x)),
    "sin": ("metal::sin(y)", lambda x, y: np.sin(y)),
    "tanh": ("metal::tanh(y)", lambda x, y: np.tanh(y)),
    "fast_exp": ("metal::fast::exp(y)", lambda x, y: np.exp(y)),
    "precise_cos": ("metal::precise::cos(y)", lambda x, y: np.cos(y)),
    "pow": ("metal::pow(x, y)", lambda x, y: np.power(x, y)),
    "fma": ("metal::fma(x, y, x)", lambda x, y: x * y + x),
    "clamp": ("metal::clamp(y, half(-1), half(0.5))", lambda x, y: np.clip(y, -1, 0.5)),
    "floor": ("metal::floor(y)", lambda x, y: np.floor(y)),
}
FLOAT4 = {  # x and y are float4 here (4 consecutive elements); the value is float4
    "exp": ("metal::exp(y)", lambda x, y: np.exp(y)),
    "sqrt": ("metal::sqrt(x)", lambda x, y: np.sqrt(x)),
    "fast_sin": ("metal::fast::sin(y)", lambda x, y: np.sin(y)),
    "precise_rsqrt": ("metal::precise::rsqrt(x)", lambda x, y: 1 / np.sqrt(x)),
    "pow": ("metal::pow(x, y)", lambda x, y: np.power(x, y)),
    "mix_scalar": ("metal::mix(x, y, 0.75f)", lambda x, y: x + (y - x) * 0.75),
    "clamp_scalar": ("metal::clamp(y, 0.0f, 1.0f)", lambda x, y: np.clip(y, 0, 1)),
    "select_mask": ("metal::select(x, y, y < x)", lambda x, y: np.where(y < x, y, x)),
    "dot": ("float4(metal::dot(x, y))",
            lambda x, y: np.repeat((x * y).reshape(-1, 4).sum(1), 4)),
    "length": ("float4(metal::length(y))",
               lambda x, y: np.repeat(np.linalg.norm(y.reshape(-1, 4), axis=1), 4)),
    "normalize": ("metal::normalize(y)",
                  lambda x, y: (y.reshape(-1, 4)
                                / np.linalg.norm(y.reshape(-1, 4), axis=1)[:, None]).ravel()),
    "cross": ("float4(metal::cross(x.xyz, y.zxy), 0.0f)",
              lambda x, y: np.concatenate(
                  [np.cross(x.reshape(-1, 4)[:, :3], y.reshape(-1, 4)[:, [2, 0, 1]]),
                   np.zeros((N // 4, 1))], axis=1).ravel()),
}

# group -> (cases, how x and y are loaded, element type of the value, threads, rtol, atol)
GROUPS = {
    "float": (FLOAT, "float x = xs[i], y = ys[i];", "float", N, 2e-6, 1e-6),
    "fast": (FAST, "float x = xs[i], y = ys[i];", "float", N, 1e-4, 1e-5),
    "precise": (PRECISE, "float x = xs[i], y = ys[i];", "float", N, 2e-6, 1e-6),
    "half": (HALF, "half x = half(xs[i]), y = half(ys[i]);", "half", N, 2e-3, 2e-3),
    "float4": (FLOAT4, "float4 x = float4(xs[4*i], xs[4*i+1], xs[4*i+2], xs[4*i+3]);\n"
               "float4 y = float4(ys[4*i], ys[4*i+1], ys[4*i+2], ys[4*i+3]);",
               "float4", N // 4, 2e-6, 1e-6),
}


def _source(group: str) -> str:
    cases, load, value_type, _, _, _ = GROUPS[group]
    lines = ["uint i = thread_position_in_grid.x;", load]
    for k, (expr, _) in enumerate(cases.values()):
        if value_type == "float4":
            lines.append(f"{{ float4 r = {expr}; for (int c = 0; c < 4; ++c) "
                         f"out[{k * N} + 4 * i + c] = r[c]; }}")
        else:
            lines.append(f"out[{k * N} + i] = float({expr});")
    return "\n".join(lines)


CASES = [(g, name) for g, spec in GROUPS.items() for name in spec[0]]


@pytest.mark.parametrize(("group", "name"), CASES, ids=[f"{g}-{n}" for g, n in CASES])
def test_math(group, name):
    cases, _, value_type, threads, rtol, atol = GROUPS[group]
    k = metal_kernel(name=f"math_{group}", input_names=["xs", "ys"], output_names=["out"],
                     source=_source(group))
    out, = k(inputs=[mx.array(X), mx.array(Y)], grid=(threads, 1, 1), threadgroup=(8, 1, 1),
             output_shapes=[(len(cases) * N,)], output_dtypes=[mx.float32])
    column = list(cases).index(name)
    got = np.array(out)[column * N:(column + 1) * N]
    x, y = X.astype(np.float64), Y.astype(np.float64)
    if value_type == "half":  # the operands are rounded to half first
        x, y = X.astype(np.float16).astype(np.float64), Y.astype(np.float16).astype(np.float64)
    want = cases[name][1](x, y)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
