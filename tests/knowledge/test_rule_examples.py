"""Every concept rule is executable knowledge: its CUDA example (cuda_sim) and its Metal example
(metal_sim) give equal results under the rule example contract (kb/concepts.py Example)."""

import numpy as np
import pytest

from kb.concepts import load_rules
from runners.dtypes import DTYPES, Tensor, to_mx
from tests.tiers import sampled

RULES = load_rules()


def _inputs(ex, rng):
    storage = np.dtype(DTYPES[ex.in_dtype][0])
    kind, *p = ex.init.split(":")
    if kind == "arange":
        data = np.arange(ex.n)
    elif kind == "randint":
        data = rng.integers(int(p[0]), int(p[1]), ex.n)
    elif kind == "uniform":
        data = rng.uniform(float(p[0]), float(p[1]), ex.n)
    else:
        data = rng.standard_normal(ex.n)
    if ex.in_dtype == "bfloat16":
        bits = data.astype(np.float32).view(np.uint32).astype(np.uint64)
        return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    return data.astype(storage)


def _as_float(a, dtype):
    if dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def test_rules_load_with_unique_ids():
    assert RULES and len({r.id for r in RULES}) == len(RULES)


@pytest.mark.parametrize("rule", sampled(RULES, [r.id for r in RULES], every=8))
def test_example_pair_agrees(rule):
    import mlx.core as mx

    from runners.cuda_sim import RawKernel
    from runners.metal_sim import metal_kernel

    ex = rule.example
    x = _inputs(ex, np.random.default_rng(0))
    out_size = ex.out_size or ex.n
    out_storage = np.dtype(DTYPES[ex.out_dtype][0])
    y_cuda = np.full(out_size, ex.y_init).astype(out_storage)
    run = RawKernel(ex.cuda, "k").launch(ex.grid, ex.block, [x, y_cuda, np.int32(ex.n)],
                                         shared_mem=ex.shared_mem)
    assert run.ok, f"CUDA example: {run.diagnostics or run.findings}"
    threads = ex.threads or [g * b for g, b in zip(ex.grid, ex.block, strict=True)]
    template = [(k, getattr(mx, v) if isinstance(v, str) else v) for k, v in ex.template.items()]
    k = metal_kernel(rule.id.replace(".", "_"), ["x", "n"], ["y"], ex.metal, ex.metal_header,
                     atomic_outputs=ex.atomic_outputs)
    mrun = k.launch(inputs=[to_mx(Tensor(x, ex.in_dtype)), np.int32(ex.n)],
                    output_shapes=[(out_size,)], output_dtypes=[getattr(mx, ex.out_dtype)],
                    grid=tuple(threads), threadgroup=tuple(ex.threadgroup or ex.block),
                    template=template or None, init_value=ex.y_init)
    assert mrun.ok, f"Metal example: {mrun.diagnostics or mrun.findings}"
    y_metal = mrun.outputs[0]
    y_metal = np.array(y_metal.view(mx.uint16) if ex.out_dtype == "bfloat16" else y_metal)
    np.testing.assert_allclose(_as_float(y_metal, ex.out_dtype), _as_float(y_cuda, ex.out_dtype),
                               rtol=ex.rtol, atol=ex.atol)
