"""Retrieval over the store: dense (sentence-transformers + chromadb), BM25 (bm25s, code-aware
tokens) and their reciprocal-rank fusion, filterable by collection, category, features and
language. A hit from a known CUDA/Metal pair carries its counterpart.

Hybrid fuses three channels: dense, BM25 over the text, and BM25 over the words that name a
chunk (kernel name, file stem, title). A query that is CUDA code is expanded with the Metal
forms of the concept rules it uses, so a CUDA kernel finds Metal ports whose text shares no CUDA
spelling with it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kb.chunks import COLLECTIONS, embed_text, name_terms
from kb.features import FEATURES, chunk_features
from kb.parse import functions, kernel_closure
from kb.rules_match import kernel_tokens, match_rules
from kb.store import KBError, KBStore

RRF_K = 60
QUERY_CODE_CHARS = 600  # of a code query embedded after its head
QUERY_CODE_TOKENS = 128  # model tokens of a code query: bounds the cost of a warm query
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


@functools.lru_cache(maxsize=1 << 16)
def _terms(ident: str) -> tuple[str, ...]:
    low = ident.lower()
    out = [low] if len(low) > 1 else []
    parts = _CAMEL.sub(r"\1_\2", ident).lower().split("_")
    if len(parts) > 1:
        out += [p for p in parts if len(p) > 1]
    return tuple(out)


def code_words(text: str) -> list[str]:
    """BM25 terms: each identifier whole (lower-case) and split at ``_`` and camelCase."""
    return [t for ident in _IDENT.findall(text) for t in _terms(ident)]


@dataclass(frozen=True)
class QueryView:
    """One query as each channel reads it: BM25 over text, BM25 over names, the embedding."""

    text: str
    names: list[str]
    dense: str
    is_code: bool = False


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
                     is_code=True)


_LOADED: dict[Path, tuple] = {}  # folder -> (index, ids, metadatas), per process


class BM25Cache:
    """The BM25 index of one collection, cached on disk per store revision (and in memory once
    loaded)."""

    def __init__(self, store: KBStore, name: str, cache_root: Path, rev: str | None = None):
        self.store, self.name, self.rev = store, name, rev
        key = hashlib.sha256(store.location.encode()).hexdigest()[:16]
        self.root = cache_root / "bm25" / key / name

    def load(self):
        """(text index, name index, ids, metadatas) for the current revision, built when
        missing. Several processes may build the same revision at once: each writes its own
        temporary folder and the first rename wins."""
        import bm25s  # lazy: it pulls in scipy (~0.4 s); only a BM25 or hybrid search needs it

        rev = self.rev or self.store.revision(self.name)
        folder = self.root / rev
        if folder in _LOADED:
            return _LOADED[folder]
        for _ in range(3):
            if not (folder / "ids.json").is_file() and not self._build(folder):
                return None, None, [], []
            try:
                meta = json.loads((folder / "ids.json").read_text())
                _LOADED[folder] = (bm25s.BM25.load(str(folder / "text")),
                                   bm25s.BM25.load(str(folder / "names")), meta["ids"],
                                   meta["metadatas"])
                return _LOADED[folder]
            except (FileNotFoundError, json.JSONDecodeError, ValueError):
                # Removed by a writer's clean-up of old revisions, or left by an older kport
                # in another layout: folders appear whole (renamed), so a broken one is stale.
                shutil.rmtree(folder, ignore_errors=True)
                continue
        raise KBError(f"the BM25 cache under {self.root} keeps changing; retry the search")

    def _build(self, folder: Path) -> bool:
        import bm25s  # lazy: as in load()

        got = self.store.documents(self.name)
        if not got["ids"]:
            return False
        pairs = list(zip(got["documents"], got["metadatas"], strict=True))
        text = bm25s.BM25()
        text.index([code_words(f"{m.get('title', '')}\n{d}") for d, m in pairs],
                   show_progress=False)
        names = bm25s.BM25()
        names.index([name_terms(str(m.get("kernel", "")), str(m.get("path", "")),
                                str(m.get("title", ""))) or ["-"] for _, m in pairs],
                    show_progress=False)
        tmp = self.root / f".{folder.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        text.save(str(tmp / "text"))
        names.save(str(tmp / "names"))
        (tmp / "ids.json").write_text(json.dumps({"ids": got["ids"],
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


def search(store: KBStore, query: str, *, kinds: list[str] | None = None, k: int = 10,
           category: str | None = None, features: list[str] = (), language: str | None = None,
           method: str = "hybrid", cache_root: Path, exclude: set[str] = frozenset(),
           depth: int = 50, expand: bool = True) -> list[Hit]:
    """The ``k`` best chunks for ``query`` (a CUDA query expanded with the Metal forms of its
    rules unless ``expand`` is off); KBError for a bad method or filter."""
    if method not in METHODS:
        raise KBError(f"unknown method {method!r}; one of {', '.join(METHODS)}")
    bad = [f for f in features if f not in FEATURES]
    if bad:
        raise KBError(f"unknown feature {bad[0]!r}; one of {', '.join(FEATURES)}")
    kinds = list(kinds or COLLECTIONS)
    where = _where(category, list(features), language)
    view = query_view(query, expand)
    vector = None if method == "bm25" else store.embedder.query(
        view.dense, QUERY_CODE_TOKENS if view.is_code else None)
    fused: dict[tuple[str, str], dict] = {}
    kinds = [name for name in kinds if store.collection(name) is not None]
    revs = store.revisions(kinds) if method != "dense" else {}
    for name in kinds:
        n = max(depth, k + len(exclude))
        if vector is not None:
            for rank, (i, sim) in enumerate(
                    [h for h in store.dense(name, vector, n, where) if h[0] not in exclude]):
                fused.setdefault((name, i), {})["dense"] = (rank, sim)
        if method == "dense":
            continue
        text_index, name_index, ids, metas = BM25Cache(store, name, cache_root,
                                                       revs[name]).load()
        channels = [("bm25", text_index, code_words(view.text))]
        if method == "hybrid":
            channels.append(("names", name_index, view.names))
        for channel, index, terms in channels:
            if index is None or not terms:
                continue
            scores = index.get_scores(terms)
            rank = 0
            for j in np.argsort(-scores, kind="stable"):
                if rank >= n or scores[j] <= 0:
                    break
                if ids[j] in exclude or not _passes(metas[j], where):
                    continue
                fused.setdefault((name, ids[j]), {})[channel] = (rank, float(scores[j]))
                rank += 1

    def score(r: dict) -> float:
        if method != "hybrid":
            key = "dense" if method == "dense" else "bm25"
            return r[key][1] if key in r else -1.0
        return sum(1.0 / (RRF_K + 1 + rank) for rank, _ in r.values())

    best = sorted(fused.items(), key=lambda kv: (-score(kv[1]), kv[0][1]))
    best = [(key, r) for key, r in best if score(r) > -1.0][:k]
    return _hits(store, [(name, i, score(r), r) for (name, i), r in best])


def search_home(settings, query: str, **kwargs) -> list[Hit]:
    """``search`` over the KB ``settings`` name (the local store or the Chroma server), with the
    BM25 cache under the home; KBError when there is no KB there."""
    return search(KBStore.from_settings(settings), query, cache_root=settings.home / "cache",
                  **kwargs)


def _hits(store: KBStore, best: list[tuple[str, str, float, dict]]) -> list[Hit]:
    """Hits with their text, metadata and pair, fetched with one get per collection."""
    rows: dict[str, dict] = {}
    for name in {b[0] for b in best}:
        got = store.get(name, [b[1] for b in best if b[0] == name])
        rows.update({(name, i): (d, m) for i, d, m in
                     zip(got["ids"], got["documents"], got["metadatas"], strict=True)})
        pairs = {str(m["pair_id"]) for _, m in
                 (rows[(name, i)] for i in got["ids"]) if m.get("pair_id")}
        got = store.get(name, sorted(pairs - {i for n, i in rows if n == name}))
        rows.update({(name, i): (d, m) for i, d, m in
                     zip(got["ids"], got["documents"], got["metadatas"], strict=True)})
    out = []
    for name, chunk_id, value, ranks in best:
        if (name, chunk_id) not in rows:  # removed by a writer since the search began
            continue
        doc, meta = rows[(name, chunk_id)]
        meta = dict(meta)
        hit = Hit(chunk_id, name, str(meta.pop("title", "")), value, doc, meta,
                  ranks={k: {"rank": v[0] + 1, "score": round(v[1], 6)}
                         for k, v in ranks.items()})
        pair = rows.get((name, str(meta.get("pair_id"))))
        if pair:
            m = dict(pair[1])
            hit.pair = {"id": str(meta["pair_id"]), "title": m.pop("title", ""),
                        "language": m.get("language"), "text": pair[0], "metadata": m}
        out.append(hit)
    return out
