"""analyze: parse the CUDA kernel, read its features and launch, and run the offline translator
(whose draft every later step starts from)."""

from __future__ import annotations

from agent.translate import translate_kernel
from agent.translate_cli import translation_json
from kb.features import chunk_features
from kb.parse import functions, kernel_closure


def kernel_features(src: str, kernel: str) -> dict:
    """Features of ``kernel`` and the functions it calls (kb.features.chunk_features):
    ``f_shared``, ``f_warp``, ``f_atomics`` ..., ``features`` and ``category``; {} when the
    kernel is not found."""
    funcs = functions(src, "cuda")
    name = kernel.split("<")[0]
    found = next((f for f in funcs if f.name == name and f.kind == "kernel"), None)
    if found is None:
        return {}
    table = {f.name: f for f in funcs if f.kind != "kernel"}
    return dict(chunk_features(kernel_closure(found, table)))


def translate_for_case(src: str, kernel: str, case, where: str,
                       origin: list[tuple[str, int]] | None = None):
    """The offline translator's Translation of ``kernel`` with the case's roles and CUDA
    launch (``origin`` as in translate_kernel). Raises TranslateError (a KportError) when the
    kernel is missing or unparsable."""
    return translate_kernel(src, kernel, roles={a.name: a.role for a in case.args},
                            grid=case.cuda.grid, block=case.cuda.block,
                            shared_mem=case.cuda.shared_mem, where=where, origin=origin)


def analyze(state, runtime) -> dict:
    """Translate the kernel offline with the case's roles and launch; returns kernel,
    translation (translation_json), features, launch, and the counters' start values.
    Raises TranslateError (a KportError) when the kernel is missing or cannot be parsed."""
    ctx = runtime.context
    case = ctx.case
    tr = translate_for_case(ctx.src, ctx.kernel, case, ctx.where, ctx.origin)
    launch = {"cuda_grid": list(case.cuda.grid), "cuda_block": list(case.cuda.block),
              "shared_mem": case.cuda.shared_mem, "mlx_grid": tr.grid,
              "threadgroup": tr.threadgroup, "size_sets": case.size_sets()}
    return {"kernel": tr.kernel, "translation": translation_json(tr),
            "features": kernel_features(ctx.src, ctx.kernel), "launch": launch,
            "phase": "port", "iteration": 0, "llm_calls": 0, "input_tokens": 0,
            "output_tokens": 0, "tokens_estimated": False, "best": None, "tree": [],
            "frontier": [], "feedback": [], "fixes": [], "candidate": None, "pending": None,
            "stop_reason": ""}
