"""The knowledge-base store: chromadb (on disk, or a shared Chroma server by URL) holding one
collection per kind of chunk, with sentence-transformers embeddings computed by kport.

Writes go in batches; ids are content hashes, so a batch that was written before a kill is
skipped on the re-run and nothing is duplicated. Each batch bumps a per-collection revision
(kept in a small ``kport_meta`` collection, so it works on a server too); the BM25 index of a
collection is cached per revision. A local store is guarded by a file lock: writers hold it
exclusively for one batch, readers share it for one query, so readers run while a long add goes
on and never see half a batch.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import secrets
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from urllib.parse import urlparse

from kb.chunks import COLLECTIONS, Chunk, embed_text
from kb.embed import Embedder
from runners.errors import KportError

PREFIX = "kport_"
META = "kport_meta"
BATCH = 64


class KBError(KportError):
    """The knowledge base is missing, corrupt, unreachable or built with another model."""


def _client(path: Path | None, url: str | None, create: bool):
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if url:
        u = urlparse(url if "://" in url else f"http://{url}")
        try:
            client = chromadb.HttpClient(host=u.hostname or "localhost", port=u.port or 8000,
                                         ssl=u.scheme == "https", settings=settings)
            client.heartbeat()
        except Exception as err:  # noqa: BLE001 - any transport error means unreachable
            raise KBError(f"cannot reach the Chroma server at {url} ({err}); start one with "
                          "`chroma run --path DIR --port PORT` or fix KPORT_CHROMA_URL") from None
        return client
    assert path is not None
    if not create and not (path / "chroma.sqlite3").is_file():
        raise KBError(f"no knowledge base at {path}: run `kport kb build` (or set KPORT_HOME / "
                      "KPORT_CHROMA_URL to where one is)")
    path.mkdir(parents=True, exist_ok=True)
    try:
        client = chromadb.PersistentClient(path=str(path), settings=settings)
        client.list_collections()
    except Exception as err:  # noqa: BLE001 - chromadb raises many types for a bad file
        raise KBError(f"the knowledge base at {path} is not a readable chromadb store "
                      f"({type(err).__name__}: {str(err)[:200]}); move it away and run "
                      "`kport kb build`") from None
    return client


class KBStore:
    """A handle on one knowledge base; ``location`` names it in messages and cache keys."""

    def __init__(self, path: Path | None = None, url: str | None = None,
                 embed_model: str | None = None, create: bool = False):
        self.path, self.url = (Path(path) if path else None), url
        self.location = url or str(self.path)
        self.embedder = Embedder(embed_model)
        self.client = _client(self.path, url, create)
        self._cols: dict[str, object] = {}

    @classmethod
    def from_settings(cls, settings, create: bool = False) -> KBStore:
        url = settings.chroma_url
        return cls(None if url else settings.kb_dir, url, settings.embed_model, create=create)

    # -- locking (local stores only; a server serialises writes itself)
    @contextlib.contextmanager
    def _lock(self, exclusive: bool) -> Iterator[None]:
        if self.path is None:
            yield
            return
        with open(self.path / ".kport.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def collection(self, name: str, create: bool = False):
        """The chromadb collection for ``name``; KBError if it was built with another model."""
        if name not in COLLECTIONS:
            raise KBError(f"unknown collection {name!r}; one of {', '.join(COLLECTIONS)}")
        if name not in self._cols:
            from chromadb.errors import NotFoundError

            try:
                col = self.client.get_collection(PREFIX + name, embedding_function=None)
            except (NotFoundError, ValueError):
                if not create:
                    return None
                col = self.client.create_collection(
                    PREFIX + name, embedding_function=None,
                    metadata={"hnsw:space": "cosine", "kport_embed_model": self.embedder.name})
            built = (col.metadata or {}).get("kport_embed_model")
            if built and built != self.embedder.name and col.count():
                raise KBError(f"the {name} collection at {self.location} was embedded with "
                              f"{built!r} but kport is set to {self.embedder.name!r}; set "
                              f"KPORT_EMBED_MODEL={built} or rebuild with `kport kb build`")
            self._cols[name] = col
        return self._cols[name]

    def _meta(self):
        if META not in self._cols:
            self._cols[META] = self.client.get_or_create_collection(META,
                                                                    embedding_function=None)
        return self._cols[META]

    def revisions(self, names: list[str]) -> dict[str, str]:
        """For each collection, a token that changes whenever it is written."""
        got = self._meta().get(ids=list(names), include=["metadatas"])
        revs = {i: str(m["rev"]) for i, m in zip(got["ids"], got["metadatas"], strict=True)}
        return {n: revs.get(n, "0") for n in names}

    def revision(self, name: str) -> str:
        return self.revisions([name])[name]

    def _bump(self, name: str) -> None:
        self._meta().upsert(ids=[name], embeddings=[[0.0]],
                            metadatas=[{"rev": secrets.token_hex(8)}])

    def add(self, chunks: Iterable[Chunk], progress: Callable[[int], None] | None = None,
            batch: int = BATCH) -> dict[str, int]:
        """Store ``chunks`` (same id = same content: never duplicated). Returns counts:
        added, present (already stored)."""
        by_col: dict[str, dict[str, Chunk]] = {}
        for ch in chunks:
            by_col.setdefault(ch.collection, {})[ch.id] = ch
        counts = {"added": 0, "present": 0}
        for name, items in by_col.items():
            col = self.collection(name, create=True)
            todo = list(items.values())
            for i in range(0, len(todo), batch):
                part = todo[i:i + batch]
                with self._lock(exclusive=False):
                    have = set(col.get(ids=[c.id for c in part], include=[])["ids"])
                new = [c for c in part if c.id not in have]
                counts["present"] += len(part) - len(new)
                if new:
                    vecs = self.embedder.documents([embed_text(c.title, c.text, c.metadata)
                                                     for c in new])
                    with self._lock(exclusive=True):
                        col.upsert(ids=[c.id for c in new], embeddings=vecs,
                                   documents=[c.text for c in new],
                                   metadatas=[{**c.metadata, "title": c.title} for c in new])
                        self._bump(name)
                    counts["added"] += len(new)
                if progress:
                    progress(len(part))
        return counts

    def remove(self, source: str) -> dict[str, int]:
        """Delete every chunk whose source is ``source``; counts per collection."""
        out = {}
        for name in COLLECTIONS:
            col = self.collection(name)
            if col is None:
                continue
            with self._lock(exclusive=True):
                ids = col.get(where={"source": source}, include=[])["ids"]
                if ids:
                    col.delete(ids=ids)
                    self._bump(name)
            if ids:
                out[name] = len(ids)
        return out

    def documents(self, name: str, include_embeddings: bool = False) -> dict:
        """Every chunk of a collection: ids, documents, metadatas (and embeddings)."""
        col = self.collection(name)
        if col is None:
            return {"ids": [], "documents": [], "metadatas": [], "embeddings": []}
        inc = ["documents", "metadatas"] + (["embeddings"] if include_embeddings else [])
        with self._lock(exclusive=False):
            got = col.get(include=inc)
        if include_embeddings:
            got["embeddings"] = [list(map(float, e)) for e in got["embeddings"]]
        return got

    def get(self, name: str, ids: list[str]) -> dict:
        col = self.collection(name)
        if col is None or not ids:
            return {"ids": [], "documents": [], "metadatas": []}
        with self._lock(exclusive=False):
            return col.get(ids=ids, include=["documents", "metadatas"])

    def dense(self, name: str, vector: list[float], k: int, where: dict | None = None) -> list:
        """[(id, cosine similarity)] of the ``k`` nearest chunks in ``name``."""
        col = self.collection(name)
        count = col.count() if col is not None else 0
        if not count:
            return []
        with self._lock(exclusive=False):
            got = col.query(query_embeddings=[vector], n_results=min(k, count),
                            where=where or None, include=["distances"])
        return [(i, 1.0 - d) for i, d in zip(got["ids"][0], got["distances"][0], strict=True)]

    def stats(self) -> dict:
        """Counts per collection and per source, the embedding model and the location."""
        out: dict = {"location": self.location, "embed_model": self.embedder.name,
                     "collections": {}, "sources": {}}
        for name in COLLECTIONS:
            col = self.collection(name)
            out["collections"][name] = col.count() if col is not None else 0
            if col is not None and col.count():
                for m in self.documents(name)["metadatas"]:
                    src = str(m.get("source", "?"))
                    out["sources"][src] = out["sources"].get(src, 0) + 1
        return out

    def export(self, dest: Path) -> int:
        """Write every chunk (with its embedding) to ``dest`` as JSON lines; returns the count."""
        n = 0
        with open(dest, "w") as fh:
            fh.write(json.dumps({"kport_kb_export": 1, "embed_model": self.embedder.name}) + "\n")
            for name in COLLECTIONS:
                got = self.documents(name, include_embeddings=True)
                for i, doc, meta, emb in zip(got["ids"], got["documents"], got["metadatas"],
                                             got["embeddings"], strict=True):
                    fh.write(json.dumps({"collection": name, "id": i, "text": doc,
                                         "metadata": meta, "embedding": emb}) + "\n")
                    n += 1
        return n

    def import_file(self, src: Path, progress: Callable[[int], None] | None = None) -> dict:
        """Load an export written by :meth:`export`. Embeddings are reused when the export was
        made with this store's model, recomputed otherwise. KBError names the bad line."""
        chunks, vectors = [], []
        try:
            lines = Path(src).read_text().splitlines()
        except (OSError, UnicodeDecodeError) as err:
            raise KBError(f"{src}: cannot read the export ({err})") from None
        try:
            head = json.loads(lines[0]) if lines else {}
        except json.JSONDecodeError:
            head = {}
        if not isinstance(head, dict) or "kport_kb_export" not in head:
            raise KBError(f"{src}:1: not a kport KB export (first line must be its header; "
                          "make one with `kport kb export`)")
        for no, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                meta = dict(row["metadata"])
                ch = Chunk(row["collection"], str(meta.pop("title", "")), row["text"], meta)
                if ch.collection not in COLLECTIONS:
                    raise KeyError("collection")
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise KBError(f"{src}:{no}: bad record ({type(err).__name__}: {err}); every "
                              "line needs collection, text, metadata") from None
            chunks.append(ch)
            vectors.append(row.get("embedding"))
        if head.get("embed_model") != self.embedder.name or None in vectors:
            return self.add(chunks, progress)
        counts = {"added": 0, "present": 0}
        for name in COLLECTIONS:
            rows = [(c, v) for c, v in zip(chunks, vectors, strict=True) if c.collection == name]
            col = self.collection(name, create=True) if rows else None
            for i in range(0, len(rows), BATCH):
                part = rows[i:i + BATCH]
                with self._lock(exclusive=True):
                    have = set(col.get(ids=[c.id for c, _ in part], include=[])["ids"])
                    new = [(c, v) for c, v in part if c.id not in have]
                    if new:
                        col.upsert(ids=[c.id for c, _ in new], embeddings=[v for _, v in new],
                                   documents=[c.text for c, _ in new],
                                   metadatas=[{**c.metadata, "title": c.title} for c, _ in new])
                        self._bump(name)
                counts["added"] += len(new)
                counts["present"] += len(part) - len(new)
                if progress:
                    progress(len(part))
        return counts
