"""Knowledge-base question benchmark: does `kport kb search` find the rule that answers a porting
question people actually ask, and how fast is a warm query?

    python -m evals.bench_kb_questions [--workdir DIR] [--latency-store DIR] [--chunks N]
                                       [--llama SDIST] [--split tune|held_out]
                                       [--questions FILE]

Questions: evals/data/kb_questions.toml, each from a public issue or forum thread and labelled
with the rule ids (concept, fix and architecture rules of kb/rules) that answer it; `split` is
fixed by a hash of the question (split_of), and search changes are tuned on "tune" only
(``--split tune`` measures that half alone, so tuning runs never print the held-out figures).
evals/data/kb_questions_fresh.toml and kb_questions_fresh2.toml to kb_questions_fresh9.toml
(``--questions``; LATER_QUESTIONS) hold questions gathered later, from threads no other
question file cites, each measured once before anything was tuned on it and tuning data
afterwards (docs/kb.md, "Questions").
Retrieval: a store built as `kport kb build` builds it; each question is searched over the
knowledge collections (rules, fixes, arch) and scores at the rank of the first hit carrying one
of its rule ids: recall@1, recall@3 and MRR per split, for hybrid search and BM25 as the anchor.
Latency: warm queries on a store of N chunks (rules, arch, fixes, corpus, llama.cpp when given,
renamed kernel copies to reach N), all collections as `kport kb search` searches them: the
questions as text queries, and whole CUDA kernels (corpus, llama.cpp) as queries.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from kb import arch
from kb.chunks import Chunk
from kb.concepts import load_rules
from kb.fixes import load_fixes
from kb.ingest import corpus_chunks
from kb.ready import default_chunks, refresh_rules
from kb.search import search
from kb.store import KBStore
from runners.errors import KportError

QUESTIONS = Path(__file__).parent / "data" / "kb_questions.toml"
# the sets gathered later, in order: each measured once, then tuning data (docs/kb.md)
LATER_QUESTIONS = tuple(QUESTIONS.with_name(f"kb_questions_{name}.toml")
                        for name in ("fresh", "fresh2", "fresh3", "fresh4", "fresh5",
                                     "fresh6", "fresh7", "fresh8", "fresh9", "fresh10",
                                     "fresh11", "fresh12"))
KNOWLEDGE = ["rules", "fixes", "arch"]  # the collections whose chunks carry a rule id
SPLITS = ("tune", "held_out")
METHODS = (("hybrid", "hybrid"), ("BM25", "bm25"))


class QuestionFileError(KportError):
    """The question file is malformed; the message names the file, the question and the key."""


@dataclass(frozen=True)
class Question:
    text: str
    source: str
    rules: tuple[str, ...]
    split: str


def split_of(text: str) -> str:
    """"tune" when the first byte of sha256(text) is even, else "held_out": fixed by the text."""
    return "tune" if hashlib.sha256(text.encode()).digest()[0] % 2 == 0 else "held_out"


def known_rule_ids() -> set[str]:
    """Every id a question may name: concept and fix rules, F1.., chip:NAME, family:NAME."""
    return ({r.id for r in load_rules()} | {f.id for f in load_fixes()}
            | {f.id for f in arch.features()} | {f"chip:{c.name}" for c in arch.chips()}
            | {f"family:{f.name}" for f in arch.families()})


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    """The questions of ``path``; QuestionFileError naming the question and key when a question
    lacks its text or source, names an unknown rule or carries a split its hash does not give."""
    try:
        rows = tomllib.loads(path.read_text())["question"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as err:
        raise QuestionFileError(f"{path}: cannot read [[question]] entries ({err})") from None
    known, seen, out = known_rule_ids(), set(), []
    for n, row in enumerate(rows, 1):
        where = f"{path}: question {n}"
        text, source, rules = row.get("question", ""), row.get("source", ""), row.get("rules", [])
        if not text.strip() or not source.strip():
            raise QuestionFileError(f"{where}: give both `question` and `source` (the thread URL)")
        if text in seen:
            raise QuestionFileError(f"{where}: duplicate question {text[:60]!r}")
        if not rules or not isinstance(rules, list):
            raise QuestionFileError(f"{where}: `rules` must list the rule ids that answer it")
        unknown = [r for r in rules if r not in known]
        if unknown:
            raise QuestionFileError(f"{where}: unknown rule id {unknown[0]!r}; use an id from "
                                    "kb/rules (or write the rule)")
        if row.get("split") != split_of(text):
            raise QuestionFileError(f"{where}: `split` must be {split_of(text)!r} (fixed by the "
                                    "hash of the question, see split_of)")
        seen.add(text)
        out.append(Question(text, source, tuple(rules), row["split"]))
    return out


def hit_rule_id(hit) -> str | None:
    """The rule id a search hit carries (concept, fix or architecture), None for other chunks."""
    m = hit.metadata
    return m.get("rule_id") or m.get("fix_id") or m.get("arch_id")


def first_rank(store: KBStore, q: Question, cache: Path, method: str = "hybrid",
               k: int = 10) -> int | None:
    """The 1-based rank of the first hit answering ``q`` among the top ``k``, else None."""
    hits = search(store, q.text, kinds=KNOWLEDGE, k=k, method=method, cache_root=cache)
    return next((i for i, h in enumerate(hits, 1) if hit_rule_id(h) in q.rules), None)


def recall(store: KBStore, questions: list[Question], cache: Path,
           method: str = "hybrid") -> dict[str, tuple[float, float, float, int]]:
    """{split: (recall@1, recall@3, MRR, number of questions)} for ``method``."""
    ranks: dict[str, list[int | None]] = {s: [] for s in SPLITS}
    for q in questions:
        ranks[q.split].append(first_rank(store, q, cache, method))
    out = {}
    for split, rs in ranks.items():
        n = max(len(rs), 1)
        out[split] = (sum(r == 1 for r in rs) / n, sum(r is not None and r <= 3 for r in rs) / n,
                      sum(1.0 / r for r in rs if r) / n, len(rs))
    return out


def misses(store: KBStore, questions: list[Question], cache: Path, split: str,
           k: int = 3) -> list[tuple[Question, list[str]]]:
    """The questions of ``split`` not answered in the top ``k``, with the ids that were."""
    out = []
    for q in questions:
        if q.split != split:
            continue
        hits = search(store, q.text, kinds=KNOWLEDGE, k=k, cache_root=cache)
        got = [hit_rule_id(h) or "-" for h in hits]
        if not set(got) & set(q.rules):
            out.append((q, got))
    return out


def knowledge_store(path: Path) -> KBStore:
    """A store at ``path`` holding what `kport kb build` adds (built when missing). A store kept
    from an earlier run (``--workdir``) has kport's rules, facts and fixes brought up to today's
    first, as `kport kb search` does (kb.ready.refresh_rules, one line on stderr when they
    changed): it measures the rules being edited, not those of its first build."""
    store = _kept(path)
    if store is None:
        store = KBStore(path, create=True)
        store.add(default_chunks())
    return store


def _kept(path: Path) -> KBStore | None:
    """The store kept at ``path`` by an earlier run, its kport rules brought up to today's;
    None when there is none."""
    if not (path / "chroma.sqlite3").is_file():
        return None
    store = KBStore(path)
    refresh_rules(store, path)
    return store


def kernel_queries(llama: list[Chunk]) -> list[str]:
    """Whole CUDA kernels used as queries: the corpus's, then llama.cpp's."""
    return [c.text for c in corpus_chunks() + llama if c.metadata.get("language") == "cuda"]


def latency_store(path: Path, chunks: int, llama: list[Chunk]) -> KBStore:
    """A store of about ``chunks`` chunks at ``path`` (built when missing): the knowledge base,
    llama.cpp's kernels and renamed copies of real kernels."""
    from evals.bench_kb import _variants  # lazy: a sibling bench, needed only to build

    store = _kept(path)
    if store is not None:
        return store
    store = KBStore(path, create=True)
    base = default_chunks() + llama
    store.add(base)
    kernels = [c for c in base if c.collection == "analogues"]
    store.add(_variants(kernels, max(0, chunks - len({c.id for c in base}))))
    return store


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def warm_ms(store: KBStore, queries: list[str], cache: Path, rounds: int) -> list[float]:
    """Milliseconds of each warm query (``rounds`` passes over ``queries``, all collections)."""
    search(store, queries[0], k=5, cache_root=cache)  # loads the model and the BM25 caches
    out = []
    for _ in range(rounds):
        for q in queries:
            t = time.perf_counter()
            search(store, q, k=5, cache_root=cache)
            out.append((time.perf_counter() - t) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=None, help="keep the stores here")
    ap.add_argument("--latency-store", type=Path, default=None,
                    help="an existing large store to time queries on (e.g. bench_kb's scale/kb)")
    ap.add_argument("--chunks", type=int, default=10_000, help="size of a latency store built")
    ap.add_argument("--llama", type=Path, default=None, help="llama-cpp-python sdist: its "
                    "CUDA kernels join the kernel queries and the latency store")
    ap.add_argument("--split", choices=SPLITS, default=None,
                    help="measure this half only (tune while tuning; default: both)")
    ap.add_argument("--misses", action="store_true", help="list the tune questions missed (of a "
                    "later set, all of them: it is tuning data once measured)")
    ap.add_argument("--no-latency", action="store_true", help="measure recall only")
    ap.add_argument("--questions", type=Path, default=QUESTIONS,
                    help=f"question file (default {QUESTIONS.name}; the later sets: "
                    f"{', '.join(q.name for q in LATER_QUESTIONS)})")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kport-bench-kbq-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        questions = [q for q in load_questions(args.questions)
                     if args.split in (None, q.split)]
    except QuestionFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    store = knowledge_store(work / "knowledge" / "kb")
    cache = work / "knowledge" / "cache"
    print(f"## Questions: {len(questions)} ("
          + ", ".join(f"{sum(q.split == s for q in questions)} {s}" for s in SPLITS)
          + f") against {sum(store.stats()['collections'].get(c, 0) for c in KNOWLEDGE)} "
            "rule, fix and architecture chunks\n")
    print("| method | split | recall@1 | recall@3 | MRR |\n|---|---|---|---|---|")
    for label, method in METHODS:
        for split, (r1, r3, mrr, n) in recall(store, questions, cache, method).items():
            if args.split not in (None, split):
                continue
            print(f"| {label} | {split} (n={n}) | {r1:.3f} | {r3:.3f} | {mrr:.3f} |")
    if args.misses:
        later = args.questions.resolve() != QUESTIONS.resolve()
        for q, got in [m for split in (SPLITS if later else ("tune",))
                       for m in misses(store, questions, cache, split)]:
            print(f"\nmiss: {q.text}\n  want {', '.join(q.rules)}\n  got  {', '.join(got)}")
    if args.no_latency:
        return 0

    llama = []
    if args.llama:
        from kb.llama_cpp import import_llama_cpp  # lazy: parses the whole sdist

        llama = import_llama_cpp(args.llama)[0]
    big = latency_store(args.latency_store or work / "scale" / "kb", args.chunks, llama)
    big_cache = (args.latency_store or work / "scale" / "kb").parent / "cache"
    total = sum(big.stats()["collections"].values())
    text_ms = warm_ms(big, [q.text for q in questions], big_cache, rounds=3)
    kernels = kernel_queries(llama)[:60]
    kernel_ms = warm_ms(big, kernels, big_cache, rounds=2)
    print(f"\n## Warm query latency ({total} chunks; {os.cpu_count()} cores)\n")
    print("| queries | p50 | p95 |\n|---|---|---|")
    print(f"| text: the questions (n={len(text_ms)}) | {_pct(text_ms, 50):.1f} ms | "
          f"{_pct(text_ms, 95):.1f} ms |")
    print(f"| whole CUDA kernels (n={len(kernel_ms)}) | {_pct(kernel_ms, 50):.1f} ms | "
          f"{_pct(kernel_ms, 95):.1f} ms |")
    print(f"\nstores kept in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
