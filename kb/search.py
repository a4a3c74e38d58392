"""Retrieval over the store: dense (sentence-transformers vectors kept in chromadb), BM25 (bm25s,
code-aware tokens) and their reciprocal-rank fusion, filterable by collection, category,
features and language. A hit from a known CUDA/Metal pair carries its counterpart.

Hybrid fuses three channels: dense, BM25 over the text, and BM25 over the words that name a
chunk (kernel name, file stem, title); a text question also reads BM25 over the prose of the
rules, fixes and facts (their text without code spellings and examples). Each channel ranks
the candidates of all the collections searched together, so the best match leads whatever its
collection. A query that is CUDA code is expanded with the Metal forms of the concept rules
it uses, so a CUDA kernel finds Metal ports whose text shares no CUDA spelling with it, and a
port channel ranks the Metal kernels whose names pair with the query kernel's. A text
question drops its stopwords, weighs the prose channel above BM25 and fuses with a smaller
RRF constant (a channel's first places count for more), uses the names channel on kernels only and
the prose channel on knowledge only; BM25 terms are lightly stemmed (plurals, -ing, -ed, -ly) on
both sides. The two sides of a known CUDA/Metal pair are one hit.
"""

from __future__ import annotations

import functools
import hashlib
import json
import mmap
import os
import re
import secrets
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kb.chunks import COLLECTIONS, asked_of, embed_text, name_terms, prose_of, without_asked
from kb.features import FEATURES, chunk_features
from kb.pairing import MIN_NAME, name_score
from kb.parse import functions, kernel_closure
from kb.rules_match import kernel_tokens, match_rules
from kb.store import KBError, KBStore

RRF_K = 60  # a code query's fusion constant
# Channel weights in the fusion, tuned on the "tune" half of evals/data/kb_questions.toml and the
# calibration questions (never on the held-out half). A text question's names channel looks only
# at kernels (analogues, docs), whose names say what they are, not at rule titles, which BM25
# already reads. Its prose channel reads the knowledge collections (rules, fixes, facts) without
# their code spellings and examples, so the words of a rule's title, notes and pitfalls count
# beside the code; with 81 tune questions it is weighed above BM25 over the whole text, and the
# smaller constant lets a channel's first places count for more (recall@1 and MRR up on both
# tuning sets, recall@3 unchanged; a range of weights around these measured alike).
CODE_WEIGHTS = {"dense": 1.0, "bm25": 1.0, "names": 1.0, "port": 1.0}
TEXT_WEIGHTS = {"dense": 1.0, "bm25": 1.0, "names": 1.0, "prose": 1.5}
TEXT_RRF_K = 20
TEXT_NAMED = ("analogues", "docs")
PROSE = ("rules", "fixes", "arch")
TOKENS = 5  # version of the cached indexes: a BM25 cache built with another one is rebuilt
QUERY_CODE_CHARS = 600  # of a code query embedded after its head
# Model tokens of a code query: the language-neutral head (names, category, features, Metal
# forms) and little code. It bounds a warm query's cost, and the head finds Metal ports better
# than more CUDA text (bench_kb's labeled set: recall@5 0.943 at 128 tokens, 0.962 at 32-56).
QUERY_CODE_TOKENS = 32
METHODS = ("hybrid", "dense", "bm25")
_CUDA_MARKERS = {"__global__", "__device__", "threadIdx", "blockIdx", "__syncthreads",
                 "__shared__", "blockDim"}


@dataclass
class Hit:
    id: str
    kind: str
    title: str
    score: float
    text: str
    metadata: dict
    pair: dict | None = None
    ranks: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "title": self.title,
                "score": round(self.score, 6), "text": self.text, "metadata": self.metadata,
                "pair": self.pair, "ranks": self.ranks}


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_VOWEL = re.compile(r"[aeiouy]")


def _stem(word: str) -> str:
    """A light English stem, the same for documents and queries: plurals (threads -> thread,
    atomics -> atomic, values -> value), -ing/-ed (spilling -> spill, padded -> pad, sized ->
    size) and -ly (atomically -> atomic). Words of 4 letters or fewer keep -ing/-ed/-ly."""
    if len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies"):
        word = word[:-3] + "y"
    elif word.endswith("s"):
        word = word[:-1]
    if len(word) <= 4:
        return word
    for suffix in ("ing", "ed"):
        stem = word[:-len(suffix)]
        if not word.endswith(suffix) or not _VOWEL.search(stem):
            continue
        if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
            return stem[:-1]  # undouble: spilling -> spill
        if suffix == "ed" and len(stem) <= 4 and stem[-1] not in "aeiouy" and stem[-2] in "aeiou":
            return stem + "e"  # sized -> size
        return stem
    if word.endswith("ally"):
        return word[:-4]
    return word[:-2] if word.endswith("ly") and len(word) > 5 else word


@functools.lru_cache(maxsize=1 << 16)
def _terms(ident: str) -> tuple[str, ...]:
    low = ident.lower()
    out = [low] if len(low) > 1 else []
    parts = _CAMEL.sub(r"\1_\2", ident).lower().split("_")
    if len(parts) > 1:
        out += [p for p in parts if len(p) > 1]
    return tuple(_stem(w) if w.isalpha() else w for w in out)


def code_words(text: str) -> list[str]:
    """BM25 terms: each identifier whole (lower-case) and split at ``_`` and camelCase; plain
    words in the singular."""
    return [t for ident in _IDENT.findall(text) for t in _terms(ident)]


# Words of a question that say nothing about the answer; a text query's BM25 terms drop them.
_STOP = frozenset(_stem(w) for w in """a an the is are was were be been being do does did how
    what which who whom why when where can could should would will shall may might must i me my
    we our you your it its this that these those of in on at to for from by with about as into
    than then there here so if or and but not no any some their them they he she his her has
    have had get got use using used want need instead way""".split())


@dataclass(frozen=True)
class QueryView:
    """One query as each channel reads it: BM25 over text, BM25 over names, the embedding."""

    text: str
    names: list[str]
    dense: str
    is_code: bool = False
    kernel: str = ""  # the name of a CUDA query's kernel


def query_view(query: str, expand: bool = True) -> QueryView:
    """A text query is used as typed. A CUDA query is read with tree-sitter: its kernel names
    feed the name channel, and (with ``expand``) the Metal forms of the concept rules it uses
    are added to the text and stand in for its CUDA intrinsics in the embedded head."""
    if not _CUDA_MARKERS & set(re.findall(r"[A-Za-z_]\w*", query)):
        return QueryView(query, name_terms(query), query)
    funcs = functions(query, "cuda")
    kernels = [f for f in funcs if f.kind == "kernel"] or funcs
    if not kernels:
        return QueryView(query, name_terms(query), query)
    table = {f.name: f for f in funcs if f.kind != "kernel"}
    closure = kernel_closure(kernels[0], table)
    feats = chunk_features(closure)
    forms = [h.metal for h in match_rules(kernel_tokens(query))] if expand else []
    meta = {"kernel": kernels[0].name, "category": feats["category"],
            "features": feats["features"], "intrinsics": ", ".join(forms)}
    names = [w for k in kernels for w in name_terms(k.name)]
    text = query + ("\n" + "\n".join(forms) if forms else "")
    return QueryView(text, names, embed_text(kernels[0].name, query[:QUERY_CODE_CHARS], meta),
                     is_code=True, kernel=kernels[0].name)


def query_terms(view: QueryView) -> tuple[list[str], list[str]]:
    """(BM25 terms of the text, words for the names channel) of a query; a text question drops
    the words that say nothing about its answer (how, do, I, the ...)."""
    text, names = code_words(view.text), view.names
    if view.is_code:
        return text, names
    return [w for w in text if w not in _STOP], [w for w in names if _stem(w) not in _STOP]


def bm25_scores(index, terms: dict[str, int]) -> np.ndarray:
    """BM25 score of every document of ``index`` (a bm25s index) for ``terms`` (each term with
    its count): what ``index.get_scores`` gives for the terms repeated, computed once per
    distinct term (a whole kernel as the query repeats most of its terms). kport builds
    lucene-method indexes, which have no score for absent terms."""
    vocab = index.vocab_dict
    found = [(vocab[w], c) for w, c in terms.items() if w in vocab]
    s = index.scores
    if not found:
        return np.zeros(s["num_docs"], dtype=np.float32)
    ids, counts = np.array(found).T
    starts, ends = s["indptr"][ids], s["indptr"][ids + 1]
    docs = np.concatenate([s["indices"][a:b] for a, b in zip(starts, ends, strict=True)])
    weights = np.concatenate([s["data"][a:b] * c
                              for a, b, c in zip(starts, ends, counts, strict=True)])
    return np.bincount(docs, weights=weights, minlength=s["num_docs"]).astype(np.float32)


def _best_first(scores: np.ndarray, top: int | None) -> np.ndarray:
    """Indices of ``scores`` from the highest, ties in index order; only the ``top`` best when
    given (a partial sort: the rest is never looked at)."""
    if top is None or top >= len(scores):
        return np.argsort(-scores, kind="stable")
    cut = scores[np.argpartition(-scores, top - 1)[top - 1]]  # the top-th best score
    sel = np.concatenate([np.flatnonzero(scores > cut),
                          np.flatnonzero(scores == cut)])[:top]
    return sel[np.lexsort((sel, -scores[sel]))]


@dataclass(frozen=True)
class Indexes:
    """The BM25 indexes of one collection's revision (text, names, and prose for knowledge
    collections), its chunks' unit vectors, and what ranking needs of its chunks."""

    channels: dict  # channel name -> bm25s index
    vectors: np.ndarray  # one unit-length row per chunk, in the order of ids
    ids: list[str]
    metadatas: list[dict]
    metal: dict[str, str]  # the kernel name of each Metal chunk, by id
    pairs: dict[str, str]  # the id of each paired chunk's counterpart, by id
    question_vectors: np.ndarray  # what a text question is compared with (see _build)
    texts: Texts  # each chunk's document, read from the cache where a hit needs it

    @functools.cached_property
    def row(self) -> dict[str, int]:
        return {i: j for j, i in enumerate(self.ids)}


class Texts:
    """The documents of one cached revision, stored end to end (documents.bin) with their
    offsets (documents.npy) and read through a memory map: a hit's text comes from the same
    revision as its ranking, without a store round trip per search (8-9 ms a query at 10k
    chunks on a busy 2-core box) and without parsing every document on the first search."""

    def __init__(self, folder: Path):
        self.offsets = np.load(folder / "documents.npy")
        with open(folder / "documents.bin", "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            self.data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __getitem__(self, j: int) -> str:
        return self.data[int(self.offsets[j]):int(self.offsets[j + 1])].decode(
            "utf-8", "surrogatepass")

    @staticmethod
    def write(folder: Path, documents: list[str]) -> None:
        blobs = [d.encode("utf-8", "surrogatepass") for d in documents]  # any str comes back
        np.save(folder / "documents.npy", np.cumsum([0] + [len(b) for b in blobs]))
        (folder / "documents.bin").write_bytes(b"".join(blobs))


_LOADED: dict[Path, Indexes] = {}  # folder -> its indexes, per process


class BM25Cache:
    """The BM25 indexes and the vectors of one collection, cached on disk per store revision
    (and in memory once loaded). Dense search is exact over these vectors: chromadb's
    approximate (HNSW) query now and then left out a nearest chunk, so the same query on the
    same store ranked differently from one process to the next."""

    def __init__(self, store: KBStore, name: str, cache_root: Path, rev: str | None = None):
        self.store, self.name, self.rev = store, name, rev
        key = hashlib.sha256(store.location.encode()).hexdigest()[:16]
        self.root = cache_root / "bm25" / key / name

    def load(self) -> Indexes | None:
        """The indexes of the current revision, built when missing; None when the collection
        is empty. Several processes may build the same revision at once: each
        writes its own temporary folder and the first rename wins."""
        import bm25s  # lazy: it pulls in scipy (~0.4 s); only a search needs it

        rev = self.rev or self.store.revision(self.name)
        folder = self.root / rev
        if folder in _LOADED:
            return _LOADED[folder]
        for _ in range(3):
            if not (folder / "ids.json").is_file() and not self._build(folder):
                return None
            try:
                meta = json.loads((folder / "ids.json").read_text())
                if meta.get("tokens") != TOKENS:
                    raise ValueError("built with other BM25 terms")
                channels = {c: bm25s.BM25.load(str(folder / sub)) for c, sub in
                            (("bm25", "text"), ("names", "names"), ("prose", "prose"))
                            if (folder / sub).is_dir()}
                rows = list(zip(meta["ids"], meta["metadatas"], strict=True))
                _LOADED[folder] = Indexes(
                    channels, np.load(folder / "vectors.npy"), meta["ids"], meta["metadatas"],
                    {i: str(m.get("kernel", "")) for i, m in rows
                     if m.get("language") == "metal"},
                    {i: str(m["pair_id"]) for i, m in rows if m.get("pair_id")},
                    np.load(folder / "questions.npy"), Texts(folder))
                return _LOADED[folder]
            except (FileNotFoundError, json.JSONDecodeError, ValueError):
                # Removed by a writer's clean-up of old revisions, or left by an older kport
                # in another layout: folders appear whole (renamed), so a broken one is stale.
                shutil.rmtree(folder, ignore_errors=True)
                continue
        raise KBError(f"the BM25 cache under {self.root} keeps changing; retry the search")

    def _question_vectors(self, vectors: np.ndarray, documents: list[str]) -> np.ndarray:
        """What a text question is compared with: a chunk's own vector plus the mean of its
        asked phrasings' vectors (kb.chunks.asked_of), renormalised; the vector alone for a
        chunk without phrasings. Tuned on the tune half of the question benchmark: mixed
        into the vector the phrasings helped (recall@3 0.877 -> 0.901), as a channel of their
        own or as BM25 text they hurt (0.84-0.85; docs/kb.md "Asked as")."""
        owner = [j for j, d in enumerate(documents) for _ in asked_of(d)]
        if not owner:
            return vectors
        asked = np.asarray(self.store.embedder.short(
            [a for d in documents for a in asked_of(d)]), dtype=np.float32)
        total = np.zeros_like(vectors)
        np.add.at(total, np.asarray(owner), asked)
        count = np.bincount(owner, minlength=len(vectors))[:, None]
        mixed = vectors + total / np.maximum(count, 1)
        return mixed / np.maximum(np.linalg.norm(mixed, axis=1, keepdims=True), 1e-12)

    def _build(self, folder: Path) -> bool:
        import bm25s  # lazy: as in load()

        got = self.store.documents(self.name, include_embeddings=True)
        if not got["ids"]:
            return False
        vectors = np.asarray(got["embeddings"], dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        pairs = list(zip(got["documents"], got["metadatas"], strict=True))
        text = bm25s.BM25()
        text.index([code_words(f"{m.get('title', '')}\n{without_asked(d)}") for d, m in pairs],
                   show_progress=False)
        names = bm25s.BM25()
        names.index([name_terms(str(m.get("kernel", "")), str(m.get("path", "")),
                                str(m.get("title", ""))) or ["-"] for _, m in pairs],
                    show_progress=False)
        tmp = self.root / f".{folder.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        text.save(str(tmp / "text"))
        names.save(str(tmp / "names"))
        if self.name in PROSE:
            prose = bm25s.BM25()
            prose.index([code_words(prose_of(str(m.get("title", "")), without_asked(d)))
                         for d, m in pairs],
                        show_progress=False)
            prose.save(str(tmp / "prose"))
        np.save(tmp / "vectors.npy", vectors)
        Texts.write(tmp, got["documents"])
        np.save(tmp / "questions.npy", self._question_vectors(vectors, got["documents"]))
        (tmp / "ids.json").write_text(json.dumps({"ids": got["ids"], "tokens": TOKENS,
                                                  "metadatas": got["metadatas"]}))
        try:
            tmp.rename(folder)
        except OSError:  # another process finished the same revision first
            shutil.rmtree(tmp, ignore_errors=True)
        for old in self.root.iterdir():
            try:  # other processes build, rename and remove entries here at the same time
                stale_tmp = old.name.endswith(".tmp") and \
                    time.time() - old.stat().st_mtime > 3600
            except FileNotFoundError:
                continue
            if old.name != folder.name and (not old.name.startswith(".") or stale_tmp):
                shutil.rmtree(old, ignore_errors=True)
        return True


def _where(category: str | None, features: list[str], language: str | None) -> dict | None:
    conds = [{f"f_{f}": True} for f in features]
    if category:
        conds.append({"category": category})
    if language:
        conds.append({"language": language})
    return None if not conds else conds[0] if len(conds) == 1 else {"$and": conds}


def _passes(meta: dict, where: dict | None) -> bool:
    if where is None:
        return True
    conds = where.get("$and", [where])
    return all(meta.get(k) == v for c in conds for k, v in c.items())


def _top(scores: np.ndarray, got: Indexes, name: str, n: int, exclude: set[str],
         where: dict | None, positive: bool) -> list[tuple[float, str, str]]:
    """(score, collection, id) of the ``n`` best chunks of ``got`` by ``scores`` that pass the
    filter and are not excluded; with ``positive``, only scores above 0 (BM25 matched)."""
    out = []
    for j in _best_first(scores, n + len(exclude) if where is None else None):
        if len(out) >= n or (positive and scores[j] <= 0):
            break
        if got.ids[j] not in exclude and _passes(got.metadatas[j], where):
            out.append((float(scores[j]), name, got.ids[j]))
    return out


def require_query(query: str) -> None:
    """KBError for an empty query: every chunk would tie, and the "hits" would be the store's
    order. Callers that open (or build) the KB first check before that."""
    if not query.strip():
        raise KBError("the query is empty: give a question, CUDA or Metal code, or @FILE")


def search(store: KBStore, query: str, *, kinds: list[str] | None = None, k: int = 10,
           category: str | None = None, features: list[str] = (), language: str | None = None,
           method: str = "hybrid", cache_root: Path, exclude: set[str] = frozenset(),
           depth: int = 50, expand: bool = True) -> list[Hit]:
    """The ``k`` best chunks for ``query`` (a CUDA query expanded with the Metal forms of its
    rules unless ``expand`` is off); KBError for a bad method or filter."""
    require_query(query)
    if method not in METHODS:
        raise KBError(f"unknown method {method!r}; one of {', '.join(METHODS)}")
    bad = [f for f in features if f not in FEATURES]
    if bad:
        raise KBError(f"unknown feature {bad[0]!r}; one of {', '.join(FEATURES)}")
    kinds = list(kinds or COLLECTIONS)
    where = _where(category, list(features), language)
    view = query_view(query, expand)
    vector = None if method == "bm25" else np.asarray(store.embedder.query(
        view.dense, QUERY_CODE_TOKENS if view.is_code else None), dtype=np.float32)
    if vector is not None:
        vector /= max(float(np.linalg.norm(vector)), 1e-12)
    # Each channel ranks its candidates from every collection searched together, so the best
    # match wins whatever its collection (ranking per collection put every collection's first
    # hit at the top); a single collection ranks as before.
    found: dict[str, list[tuple[float, str, str]]] = {}  # channel -> (score, collection, id)
    kinds = [name for name in kinds if store.collection(name) is not None]
    revs = store.revisions(kinds)
    loaded: dict[str, Indexes] = {}  # collection -> its indexes (texts, pairs) as searched
    n = max(depth, k + len(exclude))
    text_terms, name_words = (Counter(w) for w in query_terms(view))
    weights, rrf_k = (CODE_WEIGHTS, RRF_K) if view.is_code else (TEXT_WEIGHTS, TEXT_RRF_K)
    metal_names: dict[str, dict[str, str]] = {}  # CUDA query: collection -> id -> Metal kernel
    for name in kinds:
        got = BM25Cache(store, name, cache_root, revs[name]).load()
        if got is None:
            continue
        loaded[name] = got
        if vector is not None:  # einsum, not BLAS: a BLAS thread pool on a busy machine is
            # ten times slower for one matrix-vector product (13 ms instead of 1.4 at 10k chunks)
            rows = got.vectors if view.is_code else got.question_vectors
            found.setdefault("dense", []).extend(_top(np.einsum("ij,j->i", rows, vector),
                                                      got, name, n, exclude, where,
                                                      positive=False))
        if method == "dense":
            continue
        if view.is_code and method == "hybrid":
            metal_names[name] = got.metal
        channels = [("bm25", text_terms)]
        if method == "hybrid" and (view.is_code or name in TEXT_NAMED):
            channels.append(("names", name_words))
        if method == "hybrid" and not view.is_code and name in PROSE:
            channels.append(("prose", text_terms))
        for channel, terms in channels:
            index = got.channels.get(channel)
            if index is None or not terms:
                continue
            found.setdefault(channel, []).extend(
                _top(bm25_scores(index, terms), got, name, n, exclude, where, positive=True))
    fused: dict[tuple[str, str], dict] = {}
    for channel, cands in found.items():
        cands.sort(key=lambda c: -c[0])  # stable: ties keep each collection's order
        for rank, (value, name, i) in enumerate(cands[:n]):
            fused.setdefault((name, i), {})[channel] = (rank, value)
    # A CUDA query's own port, when stored, is the Metal kernel whose name pairs with the query's
    # kernel by kb.pairing's rule (op words, variants never crossed): the "port" channel ranks
    # the candidates that do, so the port is not pushed out by kernels of sibling ops.
    if view.kernel and method == "hybrid":
        ports = sorted((-sc, key) for key in fused
                       if (metal := metal_names.get(key[0], {}).get(key[1])) is not None
                       and (sc := name_score(view.kernel, metal)) >= MIN_NAME)
        for rank, (neg, key) in enumerate(ports):
            fused[key]["port"] = (rank, -neg)

    def score(r: dict) -> float:
        if method != "hybrid":
            key = "dense" if method == "dense" else "bm25"
            return r[key][1] if key in r else -1.0
        return sum(weights[c] / (rrf_k + 1 + rank) for c, (rank, _) in r.items())

    # The two sides of a known pair are one hit: the better ranked side, carrying the other as
    # its ``pair`` (a CUDA kernel and its own port took two places, pushing out a third kernel).
    best, folded = [], set()
    for (name, i), r in sorted(fused.items(), key=lambda kv: (-score(kv[1]), kv[0][1])):
        if len(best) == k or score(r) <= -1.0:
            break
        if (name, i) not in folded:
            folded.add((name, loaded[name].pairs.get(i)))
            best.append((name, i, score(r), r))
    return _hits(loaded, best)


def search_home(settings, query: str, **kwargs) -> list[Hit]:
    """``search`` over the KB ``settings`` name (the local store or the Chroma server), with the
    BM25 cache under the home; KBError when there is no KB there."""
    return search(KBStore.from_settings(settings), query, cache_root=settings.home / "cache",
                  **kwargs)


def _hits(loaded: dict[str, Indexes], best: list[tuple[str, str, float, dict]]) -> list[Hit]:
    """Hits with their text, metadata and pair, from the cached revision that ranked them."""
    out = []
    for name, chunk_id, value, ranks in best:
        got = loaded[name]
        j = got.row[chunk_id]
        meta = dict(got.metadatas[j])
        hit = Hit(chunk_id, name, str(meta.pop("title", "")), value, got.texts[j], meta,
                  ranks={k: {"rank": v[0] + 1, "score": round(v[1], 6)}
                         for k, v in ranks.items()})
        pair = got.row.get(str(meta.get("pair_id")))
        if meta.get("pair_id") and pair is not None:
            m = dict(got.metadatas[pair])
            hit.pair = {"id": str(meta["pair_id"]), "title": m.pop("title", ""),
                        "language": m.get("language"), "text": got.texts[pair], "metadata": m}
        out.append(hit)
    return out
