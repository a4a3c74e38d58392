"""Real expert Metal kernels, compiled as they ship, must compile in metal_sim (issue 14).

Apple's compiler builds every one of them, so a rejection is metal_sim's: a false rejection of
its checks or a missing shim feature. Those it rejects today are listed, with the exact error and
why, in expert_known_failures.toml; they run as strict expected failures (red the day they
compile, or when they fail with another error). Sources and versions: expert_sources.py; the
first run downloads them (about 80 MB) and skips, saying why, when the registry is unreachable.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import mlx.core as mx
import pytest

from runners.metal_sim import MetalLibrary, metal_kernel
from runners.simhost import build_only
from tests.conformance import expert_sources

KNOWN_FAILURES = Path(__file__).with_name("expert_known_failures.toml")
pytestmark = pytest.mark.slow  # about 40 compiles: a minute and more on two cores

# Launch arguments the compile needs (MLX writes template values and input dtypes into the
# kernel's signature), read off each kernel's call site in mlx-lm; sizes are typical ones.
# Inputs are float32 unless named in `dtypes`; those in SCALARS are 0-d arrays (MLX passes
# them as `const constant T&`) unless named in `arrays`.
SCALARS = {"eps", "pre_eps", "scale", "multiplier", "log2_base", "offset", "seq_len", "T", "N"}
MLX_LM_LAUNCH = {
    "expert_routing": {"template": {"E": 64, "K": 8}},
    "norm_add_norm_pre_norm": {"template": {"T": "float16", "D": 1024, "TG": 256}},
    "post_expert_norm_combine": {"template": {"T": "float16", "D": 1024, "K": 8, "TG": 256}},
    "qk_norm": {"template": {"T": "float16", "D": 128, "HQ": 16, "HK": 4}},
    "qk_norm_rope": {"template": {"T": "float16", "D": 128, "HQ": 16, "HK": 4,
                                  "OFFSET_STRIDE": 0},
                     "dtypes": {"offset": "int32", "seq_len": "int32"}, "arrays": {"offset"}},
    "rms_norm_sigmoid_gate": {"template": {"T": "float16", "D": 128}},
    "bitlinear_matmul": {"template": {"T": "float16", "invert_weight_scales": False,
                                      "in_features": 256, "out_features": 256},
                         "dtypes": {"packed_weights": "uint8"}},
    "deepseek_v41_sinkhorn": {"template": {"HC": 4, "ITERS": 20}, "arrays": {"eps"}},
    "gated_delta_step": {"template": {"InT": "bfloat16", "StT": "float32", "Dk": 128,
                                      "Dv": 128, "Hk": 16, "Hv": 32}, "dtypes": {"T": "int32"}},
    "gated_delta_step_xtree": {"template": {"InT": "bfloat16", "StT": "float32", "Dk": 128,
                                            "Dv": 128, "Hk": 16, "Hv": 32},
                               "dtypes": {"T": "int32"}},
    "gated_delta_step_packed_btree": {"template": {"InT": "bfloat16", "StT": "float32",
                                                   "Dk": 128, "Dv": 128, "Hk": 16, "Hv": 32},
                                      "dtypes": {"T": "int32"}},
    "attnres_mix": {"template": {"InT": "bfloat16", "K": 4, "D": 1024, "THREADS": 256},
                    "dtypes": {"N": "int32"}, "arrays": {"eps"}},
    "wkv7_kernel": {"template": {"InT": "bfloat16", "H": 8, "D": 64}, "dtypes": {"T": "int32"}},
    "ssm_kernel": {"template": {"T": "float16", "U": "float32", "Dh": 64, "Ds": 128, "H": 8,
                                "G": 1}},
    **{name: {"template": {"T": "float32", "V": 4096}}
       for name in ("kl_forward", "kl_backward", "js_forward", "js_backward")},
}


@functools.cache
def known_failures() -> dict[str, dict]:
    """expert_known_failures.toml by kernel id: ``error`` (text the diagnostics hold), ``why``."""
    entries = tomllib.loads(KNOWN_FAILURES.read_text()).get("failure", [])
    return {k: e for e in entries for k in e["kernels"]}


@functools.cache
def _load(load):
    """``load()``'s value, or the SourcesUnavailable it raised: pip is asked once a session."""
    try:
        return load()
    except expert_sources.SourcesUnavailable as err:
        return err


def _sources(load):
    found = _load(load)
    if isinstance(found, expert_sources.SourcesUnavailable):
        pytest.skip(f"expert kernel sources unavailable: {found}")
    return found


def check_compiles(kernel_id: str, run) -> None:
    """Pass when ``run`` compiled; a listed known failure must fail with its listed error."""
    known = known_failures().get(kernel_id)
    errors = "\n".join(str(d) for d in run.diagnostics if d.severity == "error")
    if known is None:
        assert run.compiled, f"metal_sim rejects {kernel_id}, which Apple's compiler " \
                             f"accepts:\n{errors[:3000]}"
        return
    if run.compiled:
        pytest.fail(f"{kernel_id} compiles now: remove it from {KNOWN_FAILURES.name}")
    assert known["error"] in errors, f"{kernel_id} fails with another error than the listed " \
                                     f"one:\n{errors[:3000]}"
    pytest.xfail(known["why"])


GGML_FILES = ["argsort", "binbcast", "conv", "fa_aux", "fa_f16", "fa_f32", "fa_q4_0", "fa_q4_1",
              "fa_q5_0", "fa_q5_1", "fa_q8_0", "fa_vec_f16", "fa_vec_f32", "fa_vec_q4_0",
              "fa_vec_q4_1", "fa_vec_q5_0", "fa_vec_q5_1", "fa_vec_q8_0", "gated_delta_net",
              "misc", "mul_mm", "mul_mv", "norm", "pool", "quantize", "reduce", "rope", "softmax",
              "solve_tri", "ssm", "tri", "unary", "upscale", "wkv"]


def test_ggml_file_list_is_the_shipped_one():
    assert sorted(_sources(expert_sources.ggml_metal_sources)) == [
        f"{n}.metal" for n in GGML_FILES]


# llama.cpp compiles its library with GGML_METAL_HAS_BF16 on Macs with bfloat (M2 and later:
# ggml-metal-device.m sets it in MTLCompileOptions.preprocessorMacros), which adds the bfloat
# kernels to the others; GGML_METAL_HAS_TENSOR (Metal 4's <metal_tensor>) stays unset.
GGML_BF16 = {"GGML_METAL_HAS_BF16": 1}
# the files with the most `#if defined(GGML_METAL_HAS_BF16)` groups, built without it too
GGML_WITHOUT_BF16 = ["fa_vec_f16", "mul_mv", "quantize"]


@pytest.mark.parametrize("name", GGML_FILES)
def test_ggml_metal_library_compiles(name):
    """Each ggml-metal kernel file, headers inlined, as one library: every kernel and every
    explicit instantiation of the template kernels, with llama.cpp's macros for an M2."""
    source = _sources(expert_sources.ggml_metal_sources)[f"{name}.metal"]
    check_compiles(f"ggml/{name}", MetalLibrary(source, f"{name}.metal", GGML_BF16).build())


@pytest.mark.parametrize("name", GGML_WITHOUT_BF16)
def test_ggml_metal_library_compiles_without_bfloat(name):
    source = _sources(expert_sources.ggml_metal_sources)[f"{name}.metal"]
    check_compiles(f"ggml-no-bf16/{name}", MetalLibrary(source, f"{name}.metal").build())


def _mlx_lm_ids() -> list[str]:
    # the ids are the kernel names mlx-lm gives; the list is fixed here so that collecting
    # the tests downloads nothing
    return sorted(MLX_LM_LAUNCH)


def test_mlx_lm_kernels_are_all_listed():
    """Every metal_kernel call of the pinned mlx-lm is tested, or skipped for a known reason."""
    kernels = _sources(expert_sources.mlx_lm_kernels)
    assert sorted(k.name for k in kernels if not k.skipped) == _mlx_lm_ids()
    skipped = {k.where: k.skipped for k in kernels if k.skipped}
    assert skipped == {  # their `source` is a helper function's result
        "mlx_lm/kernels/norm_add_norm.py:110": "`source` is computed at run time "
                                               "(_source(pre_norm=True))",
        "mlx_lm/kernels/norm_add_norm.py:118": "`source` is computed at run time "
                                               "(_source(pre_norm=False))"}


@pytest.mark.parametrize("name", _mlx_lm_ids())
def test_mlx_lm_metal_kernel_compiles(name):
    kernel = next(k for k in _sources(expert_sources.mlx_lm_kernels) if k.name == name)
    launch = MLX_LM_LAUNCH[name]
    dtypes = launch.get("dtypes", {})
    template = [(n, getattr(mx, v) if isinstance(v, str) else v)
                for n, v in launch["template"].items()]
    built = metal_kernel(kernel.name, kernel.input_names, kernel.output_names, kernel.source,
                         kernel.header, atomic_outputs=kernel.atomic_outputs)
    scalars = SCALARS - launch.get("arrays", set())
    inputs = [mx.zeros(() if n in scalars else (16,), getattr(mx, dtypes.get(n, "float32")))
              for n in kernel.input_names]
    with build_only():  # compiles; launches nothing
        run = built.launch(inputs=inputs, template=template,
                           output_shapes=[(16,)] * len(kernel.output_names),
                           output_dtypes=[mx.float32] * len(kernel.output_names),
                           grid=(32, 1, 1), threadgroup=(32, 1, 1))
    check_compiles(f"mlx-lm/{name}", run)
