"""Knowledge-base benchmark: analogue retrieval quality, query latency, build throughput.

    python -m evals.bench_kb --llama llama_cpp_python-0.3.36.tar.gz [--workdir DIR] [--chunks N]

Retrieval: each labeled CUDA kernel (the corpus's 43 cases, and llama.cpp ggml-cuda kernels with
their hand-labeled ggml-metal ports in evals/data/kb_labeled_llama.toml) is the query; the index
holds only Metal kernels (every corpus port and every llama.cpp Metal kernel), so the CUDA side
of a pair never answers for itself. A query scores when one of its expert Metal ports is ranked.
Latency: a store of N chunks (rules, architecture, fixes, corpus, llama.cpp, plus renamed copies
of real kernels to reach N), warm in-process queries and cold `kport kb search` processes.
Get the sdist with: pip download --no-deps --no-binary :all: llama-cpp-python -d DIR
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from kb.chunks import Chunk, arch_chunks, fix_chunks, rule_chunks
from kb.ingest import corpus_chunks
from kb.llama_cpp import import_llama_cpp
from kb.search import search
from kb.store import KBStore

LABELS = Path(__file__).parent / "data" / "kb_labeled_llama.toml"
TEXT_QUERIES = [
    "warp shuffle reduction", "online softmax", "layer norm backward", "atomic float add",
    "threadgroup memory tiling for matmul", "simdgroup_matrix multiply accumulate",
    "bfloat16 on M1", "dynamic shared memory", "rotary position embedding",
    "q4_0 dequantize matrix vector", "flash attention causal mask", "prefix sum scan",
    "cooperative groups grid sync", "double precision", "half2 vector loads",
    "bitonic sort in shared memory", "selective scan mamba", "histogram with atomics",
    "memory bandwidth M2 Max", "threadgroup_barrier divergent",
]


def _labeled(llama: list[Chunk]) -> tuple[list[tuple[str, str, set[str]]], list[Chunk]]:
    """(queries as (name, CUDA text, ids of the right Metal chunks), the Metal index)."""
    corpus = corpus_chunks()
    metal = [c for c in corpus + llama if c.metadata.get("language") == "metal"]
    queries = []
    by_id = {c.id: c for c in corpus}
    for c in corpus:
        if c.metadata.get("pair_role") == "cuda":
            queries.append((str(c.metadata["case"]), c.text, {by_id[c.metadata["pair_id"]].id}))
    names: dict[str, set[str]] = {}
    for c in metal:
        names.setdefault(str(c.metadata.get("kernel")), set()).add(c.id)
    cuda = {str(c.metadata.get("kernel")): c for c in llama
            if c.metadata.get("language") == "cuda"}
    for row in tomllib.loads(LABELS.read_text())["pair"]:
        want = set().union(*(names.get(m, set()) for m in row["metal"]))
        if row["cuda"] in cuda and want:
            queries.append((f"llama:{row['cuda']}", cuda[row["cuda"]].text, want))
    return queries, metal


def retrieval_table(store: KBStore, queries, cache: Path) -> list[tuple]:
    rows = []
    for label, method, expand in [("dense", "dense", True), ("BM25", "bm25", True),
                                  ("hybrid (RRF)", "hybrid", True),
                                  ("hybrid, no rule expansion", "hybrid", False)]:
        r1 = r5 = mrr = 0.0
        for _, text, want in queries:
            hits = search(store, text, kinds=["analogues"], k=10, method=method,
                          cache_root=cache, expand=expand)
            ranks = [i for i, h in enumerate(hits, 1) if h.id in want]
            first = ranks[0] if ranks else None
            r1 += first == 1
            r5 += first is not None and first <= 5
            mrr += 1.0 / first if first else 0.0
        n = len(queries)
        rows.append((label, r1 / n, r5 / n, mrr / n))
    return rows


def _variants(seed: list[Chunk], n: int) -> list[Chunk]:
    """``n`` distinct renamed copies of the seed kernels (copies of twin seeds are skipped)."""
    out, ids, i = [], set(), 0
    while len(out) < n:
        c = seed[i % len(seed)]
        k = i // len(seed) + 1
        name = str(c.metadata.get("kernel", "k"))
        text = c.text.replace(name, f"{name}_v{k}") + f"\n// variant {k}"
        v = Chunk("analogues", f"{c.title} v{k}", text,
                  {**c.metadata, "kernel": f"{name}_v{k}", "source": "bench-variants"})
        if v.id not in ids:
            ids.add(v.id)
            out.append(v)
        i += 1
    return out


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama", type=Path, required=True, help="llama-cpp-python sdist or "
                    "llama.cpp checkout")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the stores here")
    ap.add_argument("--chunks", type=int, default=10_000, help="size of the latency store")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kport-bench-kb-"))
    work.mkdir(parents=True, exist_ok=True)

    t = time.perf_counter()
    llama, report, _ = import_llama_cpp(args.llama)
    parse_s = time.perf_counter() - t
    queries, metal = _labeled(llama)
    store = KBStore(work / "retrieval" / "kb", create=True)
    t = time.perf_counter()
    store.add(metal)
    metal_s = time.perf_counter() - t
    rows = retrieval_table(store, queries, work / "retrieval" / "cache")

    home = work / "scale"
    big = KBStore(home / "kb", create=True)
    base = rule_chunks() + arch_chunks() + fix_chunks() + corpus_chunks() + llama
    t = time.perf_counter()
    real_added = big.add(base)["added"]
    real_s = time.perf_counter() - t
    kernels = [c for c in base if c.collection == "analogues"]
    have = len({c.id for c in base})
    t = time.perf_counter()
    var_added = big.add(_variants(kernels, max(0, args.chunks - have)))["added"]
    var_s = time.perf_counter() - t
    total = sum(big.stats()["collections"].values())

    cache = home / "cache"
    big.remove("bench-marker")  # a write to the big collection: its BM25 cache is stale now
    big.add([Chunk("analogues", "marker", f"bench marker {time.time()}",
                   {"source": "bench-marker"})])
    t = time.perf_counter()
    search(big, "warm-up", k=5, cache_root=cache)  # rebuilds the stale BM25 cache
    first_s = time.perf_counter() - t
    text_ms, kernel_ms = [], []
    for _ in range(3):
        for q in TEXT_QUERIES:
            t = time.perf_counter()
            search(big, q, k=5, cache_root=cache)
            text_ms.append((time.perf_counter() - t) * 1000)
    for _, q, _ in queries[:40]:
        t = time.perf_counter()
        search(big, q, k=5, cache_root=cache)
        kernel_ms.append((time.perf_counter() - t) * 1000)
    cold = []
    env = {**os.environ, "KPORT_HOME": str(home)}
    for q in ("online softmax", "atomic float add", "rotary embedding"):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "agent.cli", "kb", "search", q, "--json"],
                              env=env, capture_output=True, text=True)
        cold.append(time.perf_counter() - t)
        if proc.returncode:
            print(proc.stderr, file=sys.stderr)
            return 1

    n_corpus = sum(1 for q in queries if not q[0].startswith("llama:"))
    print(f"## Retrieval: {len(queries)} labeled CUDA queries ({n_corpus} corpus, "
          f"{len(queries) - n_corpus} llama.cpp) against {len(metal)} Metal kernels\n")
    print("| method | recall@1 | recall@5 | MRR |\n|---|---|---|---|")
    for label, r1, r5, mrr in rows:
        print(f"| {label} | {r1:.3f} | {r5:.3f} | {mrr:.3f} |")
    print(f"\n## Speed ({total} chunks; {os.cpu_count()} cores)\n")
    print("| measure | value |\n|---|---|")
    print(f"| warm hybrid query, text (n={len(text_ms)}) | p50 {_pct(text_ms, 50):.1f} ms, "
          f"p95 {_pct(text_ms, 95):.1f} ms |")
    print(f"| warm hybrid query, whole CUDA kernel (n={len(kernel_ms)}) | p50 "
          f"{_pct(kernel_ms, 50):.1f} ms, p95 {_pct(kernel_ms, 95):.1f} ms |")
    print(f"| first query after a write (builds BM25 caches) | {first_s:.2f} s |")
    print(f"| cold `kport kb search` (new process) | median {statistics.median(cold):.2f} s, "
          f"max {max(cold):.2f} s |")
    print(f"| llama.cpp sdist parse ({report.files} files -> {len(llama)} kernel chunks, "
          f"{report.pairs} pairs, {len(report.skipped)} skipped) | {parse_s:.1f} s |")
    print(f"| build: {len(metal)} Metal kernels | {len(metal) / metal_s:.1f} chunks/s |")
    print(f"| build: rules+arch+fixes+corpus+llama.cpp ({real_added} new) | "
          f"{real_added / max(real_s, 1e-9):.1f} chunks/s |")
    print(f"| build: {var_added} kernel variants to reach {total} | "
          f"{var_added / max(var_s, 1e-9):.1f} chunks/s |")
    print(f"\nstores kept in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
