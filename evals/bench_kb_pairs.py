"""Do pairs found by `kport kb add` improve analogue retrieval? Held-out CUDA kernels as queries.

    python -m evals.bench_kb_pairs --llama DIR --candle DIR [--experiment op|port|both]

``--llama``: a llama.cpp checkout or the unpacked llama-cpp-python sdist (ggml-cuda, ggml-metal);
``--candle``: a folder holding candle-kernels/src and candle-metal-kernels/src (the candle-nn
sdist; tests/conformance/expert_sources.candle_kernel_trees fetches it).
Pairing accuracy: every labeled CUDA kernel (evals/data/kb_labeled_llama.toml,
kb_labeled_candle.toml), its pair under each method against the labels.
``op`` (a kernel new to the KB): the trees' kernels fall in fixed halves by a hash of their op
name key (kb.pairing.name_key; ``soft_max_f32`` and ``kernel_soft_max`` together); the held-out
half's CUDA kernels are the queries and none of its kernels, CUDA or Metal, is stored. A query
scores at the first hit whose Metal side (the hit, or the Metal kernel it is paired with) is of
the query's op category. Stores: what `kport kb build` stores, then the training half added as
Metal kernels only, as both sides unpaired, paired by name only, paired by name and content.
``port`` (the port is known but not linked): labeled kernels split by a hash of the CUDA name;
every Metal kernel is stored; a query scores at its labeled Metal port, or a CUDA kernel paired
with it.
"""

from __future__ import annotations

import argparse
import tempfile
import tomllib
from pathlib import Path

from kb.chunks import Chunk, pair
from kb.ingest import ingest
from kb.llama_cpp import import_llama_cpp
from kb.pairing import MIN_NAME, name_key, name_score, pair_kernels, split_of
from kb.ready import default_chunks
from kb.search import search
from kb.store import KBStore

DATA = Path(__file__).parent / "data"


def _plain(c: Chunk) -> Chunk:
    return Chunk(c.collection, c.title, c.text,
                 {k: v for k, v in c.metadata.items() if not k.startswith("pair_")})


def _trees(llama: Path, candle: Path) -> tuple[list[Chunk], list[Chunk]]:
    chunks = [_plain(c) for c in import_llama_cpp(llama)[0]]
    for sub in ("candle-kernels/src", "candle-metal-kernels/src"):
        chunks += ingest(candle / sub, "candle-nn:0.4.2")[0]
    return ([c for c in chunks if c.metadata.get("language") == "cuda"],
            [c for c in chunks if c.metadata.get("language") == "metal"])


def _labels() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name in ("kb_labeled_llama.toml", "kb_labeled_candle.toml"):
        for row in tomllib.loads((DATA / name).read_text())["pair"]:
            out[row["cuda"]] = set(row["metal"])
    return out


def pair_by_name(cuda: list[Chunk], metal: list[Chunk]) -> list[Chunk]:
    """The baseline: pairs by name alone (the same name key, best first, one pair each)."""
    scored = sorted((-name_score(str(c.metadata["kernel"]), str(m.metadata["kernel"])), i, j)
                    for i, c in enumerate(cuda) for j, m in enumerate(metal))
    out_c, out_m, used_c, used_m = list(cuda), list(metal), set(), set()
    for s, i, j in scored:
        if -s < MIN_NAME:
            break
        if i not in used_c and j not in used_m:
            used_c.add(i)
            used_m.add(j)
            out_c[i], out_m[j] = pair(cuda[i], metal[j])
    return out_c + out_m


def _pairs_of(chunks: list[Chunk]) -> dict[str, str]:
    by_id = {c.id: c for c in chunks}
    return {str(c.metadata["kernel"]): str(by_id[c.metadata["pair_id"]].metadata["kernel"])
            for c in chunks if c.metadata.get("pair_role") == "cuda"}


def accuracy(cuda, metal, labels) -> list[tuple]:
    rows = []
    for label, chunks in (("name only", pair_by_name(cuda, metal)),
                          ("name + content", pair_kernels(cuda, metal)[0])):
        got = _pairs_of(chunks)
        judged = [k for k in got if k in labels]
        right = sum(got[k] in labels[k] for k in judged)
        rows.append((label, len(got), len(judged), right, len(judged) - right,
                     f"{right}/{len(labels)}"))
    return rows


def _metal_of(hit) -> str | None:
    if hit.metadata.get("language") == "metal":
        return str(hit.metadata.get("kernel"))
    if hit.pair and hit.pair.get("language") == "metal":
        return str(hit.pair["metadata"].get("kernel"))
    return None


def retrieval(store: KBStore, queries, cache: Path, scores) -> tuple[float, float, float]:
    """recall@1, recall@5 and MRR of ``queries`` (text, target), a hit scoring when
    ``scores(hit, target)``."""
    r1 = r5 = mrr = 0.0
    for text, want in queries:
        hits = search(store, text, kinds=["analogues"], k=10, cache_root=cache)
        first = next((i for i, h in enumerate(hits, 1) if scores(h, want)), None)
        r1 += first == 1
        r5 += first is not None and first <= 5
        mrr += 1.0 / first if first else 0.0
    n = len(queries)
    return r1 / n, r5 / n, mrr / n


def _is_port(hit, want: set[str]) -> bool:
    return _metal_of(hit) in want


def _same_category(hit, category: str) -> bool:
    meta = hit.metadata if hit.metadata.get("language") == "metal" else (
        hit.pair["metadata"] if hit.pair and hit.pair.get("language") == "metal" else {})
    return meta.get("category") == category


def _table(work: Path, name: str, variants, queries, scores) -> None:
    print("| store | recall@1 | recall@5 | MRR |")
    print("|---|---|---|---|")
    for i, (label, chunks) in enumerate(variants):
        store = KBStore(work / f"{name}{i}" / "kb", create=True)
        store.add(chunks)
        r1, r5, mrr = retrieval(store, queries, work / f"{name}{i}" / "cache", scores)
        print(f"| {label} | {r1:.3f} | {r5:.3f} | {mrr:.3f} |", flush=True)


def _answered(chunks: list[Chunk]) -> list[Chunk]:
    return [c for c in chunks if c.metadata.get("language") != "cuda" or "pair_id" in c.metadata]


def _op_half(chunk: Chunk) -> str:
    return split_of(" ".join(sorted(name_key(str(chunk.metadata["kernel"])))))


def op_experiment(work: Path, cuda: list[Chunk], metal: list[Chunk]) -> None:
    train_c = [c for c in cuda if _op_half(c) == "train"]
    train_m = [m for m in metal if _op_half(m) == "train"]
    queries = [(c.text, str(c.metadata["category"])) for c in cuda if _op_half(c) == "held"
               and c.metadata.get("category") not in (None, "other")]
    base = default_chunks()
    print(f"\nop: {len(queries)} held-out CUDA queries (op category known); training half "
          f"{len(train_c)} CUDA, {len(train_m)} Metal kernels\n")
    _table(work, "op", [
        ("before: `kport kb build` only", base),
        ("+ training half, Metal kernels only", base + train_m),
        ("+ training half, both sides unpaired", base + train_c + train_m),
        ("+ training half, paired by name only", base + pair_by_name(train_c, train_m)),
        ("+ training half, paired by name + content",
         base + pair_kernels(train_c, train_m)[0]),
        ("+ training half, paired by name + content, unpaired CUDA left out",
         base + _answered(pair_kernels(train_c, train_m)[0]))], queries, _same_category)


def port_experiment(work: Path, cuda: list[Chunk], metal: list[Chunk], labels) -> None:
    names = {str(c.metadata["kernel"]) for c in metal}
    held = [c for c in cuda if split_of(str(c.metadata["kernel"])) == "held"]
    train = [c for c in cuda if split_of(str(c.metadata["kernel"])) == "train"]
    queries = [(c.text, labels[k] & names) for c in held
               if (k := str(c.metadata["kernel"])) in labels and labels[k] & names]
    base = default_chunks() + metal
    print(f"\nport: {len(queries)} held-out queries ({len(held)} held-out CUDA kernels left "
          f"out, {len(train)} in the training half, {len(metal)} Metal kernels)\n")
    _table(work, "port", [
        ("before: Metal kernels only", base),
        ("+ training-half CUDA kernels, unpaired", base + train),
        ("+ training-half pairs, by name only", default_chunks() + pair_by_name(train, metal)),
        ("+ training-half pairs, by name + content",
         default_chunks() + pair_kernels(train, metal)[0]),
        ("+ training-half pairs, by name + content, unpaired CUDA left out",
         default_chunks() + _answered(pair_kernels(train, metal)[0]))], queries, _is_port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama", type=Path, required=True)
    ap.add_argument("--candle", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--experiment", choices=("op", "port", "both"), default="both")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kport-bench-pairs-"))
    cuda, metal = _trees(args.llama, args.candle)
    labels = _labels()
    print("| pairing | pairs | labeled CUDA kernels paired | right | wrong | labels recovered |")
    print("|---|---|---|---|---|---|")
    for row in accuracy(cuda, metal, labels):
        print("| " + " | ".join(str(x) for x in row) + " |")
    if args.experiment in ("op", "both"):
        op_experiment(work, cuda, metal)
    if args.experiment in ("port", "both"):
        port_experiment(work, cuda, metal, labels)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
