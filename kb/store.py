"""The knowledge-base store: chromadb (on disk, or a shared Chroma server by URL) holding one
collection per kind of chunk, with sentence-transformers embeddings computed by kport.

A local store changes atomically: $KPORT_HOME/kb is a link to a complete version folder beside
it (``.kb.<token>``). A write (add, import, remove) copies the current version into a fresh
folder, writes there, and on success re-points the link in one rename; a failure or a kill
leaves the previous version as it was, and never an empty or half-built store. Writers take a
lock for the whole write; readers keep reading the version they opened, each query under a
shared lock of that folder, and open the new one at their next query. A Chroma server (--url)
is written in place: inputs are read and checked whole before the first write, and ids are
content hashes, so a re-run after a kill skips what was written and duplicates nothing.

Each write bumps a per-collection revision (kept in a small ``kport_meta`` collection, so it
works on a server too); the BM25 index of a collection is cached per revision.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from urllib.parse import urlparse

from kb.chunks import COLLECTIONS, Chunk, asked_of, embed_text
from kb.embed import Embedder
from runners.errors import KportError

PREFIX = "kport_"
META = "kport_meta"
BATCH = 64


class KBError(KportError):
    """The knowledge base is missing, corrupt, unreachable or built with another model."""


def _client(path: Path | None, url: str | None, create: bool):
    import chromadb  # lazy: ~1 s to import; `kport kb` verbs that never open a store skip it
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
    if not (path / "chroma.sqlite3").is_file():
        if create:
            return None  # the first write makes the store (KBStore.writing)
        raise KBError(f"no knowledge base at {path}: run `kport kb build` (or set KPORT_HOME / "
                      "KPORT_CHROMA_URL to where one is)")
    try:
        client = chromadb.PersistentClient(path=str(path), settings=settings)
        client.list_collections()
    except Exception as err:  # noqa: BLE001 - chromadb raises many types for a bad file
        raise KBError(f"the knowledge base at {path} is not a readable chromadb store "
                      f"({type(err).__name__}: {str(err)[:200]}); move it away and run "
                      "`kport kb build`") from None
    return client


def _open_new(path: Path):
    import chromadb  # lazy: as in _client()
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def _version_dirs(link: Path) -> list[Path]:
    """The version folders of the local store ``link`` names (current, old and abandoned)."""
    return [p for p in link.parent.glob(f".{link.name}.v-*") if p.is_dir()]


def read_export(src: Path) -> tuple[dict, list[Chunk], list]:
    """(header, chunks, embeddings or None each) of a `kport kb export` file, read and checked
    whole before anything is written; KBError names the file and the bad line."""
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
            ch = _export_chunk(row)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise KBError(f"{src}:{no}: bad record ({type(err).__name__}: {err}); every "
                          "line needs collection, text, metadata (and may have an "
                          "embedding); nothing was imported") from None
        chunks.append(ch)
        vectors.append(row.get("embedding"))
    if not chunks:
        raise KBError(f"{src}: the export holds no chunks; nothing to import")
    if len({len(v) for v in vectors if v is not None}) > 1:
        raise KBError(f"{src}: its embeddings differ in length; not one model's export")
    return head, chunks, vectors


def _export_chunk(row) -> Chunk:
    """The chunk of one export line; KeyError / TypeError / ValueError saying what is wrong
    (checked whole before the first write, so a bad line imports nothing)."""
    if not isinstance(row, dict):
        raise TypeError("not a JSON object")
    if row["collection"] not in COLLECTIONS:
        raise ValueError(f"collection {row['collection']!r} is not one of "
                         f"{', '.join(COLLECTIONS)}")
    meta, text, emb = row["metadata"], row["text"], row.get("embedding")
    if not isinstance(meta, dict) or not isinstance(text, str):
        raise TypeError("text must be a string and metadata an object")
    bad = [k for k, v in meta.items() if not isinstance(v, (str, int, float, bool))]
    if bad:
        raise TypeError(f"metadata {bad[0]!r} is not a string, number or boolean")
    if emb is not None and not (isinstance(emb, list) and emb and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in emb)):
        raise TypeError("embedding must be a list of numbers")
    meta = dict(meta)
    return Chunk(row["collection"], str(meta.pop("title", "")), text, meta)


def _publish(link: Path, stage: Path) -> None:
    """Point ``link`` at the version folder ``stage`` with one rename. A store of an older
    kport (a folder, not a link) is first moved aside, once."""
    tmp = link.parent / f".{link.name}.link-{secrets.token_hex(4)}"
    os.symlink(stage.name, tmp)
    if link.is_dir() and not link.is_symlink():
        os.rename(link, link.parent / f".{link.name}.v-older-{secrets.token_hex(4)}")
    os.replace(tmp, link)


class KBStore:
    """A handle on one knowledge base; ``location`` names it in messages and cache keys."""

    def __init__(self, path: Path | None = None, url: str | None = None,
                 embed_model: str | None = None, create: bool = False):
        self.path, self.url = (Path(path) if path else None), url
        self.location = url or str(self.path)
        self.embedder = Embedder(embed_model)
        self._root = self.path.resolve() if self.path else None  # the version folder read
        self._writing = False
        self._write_locked = False
        self.client = _client(self._root, url, create)
        self._cols: dict[str, object] = {}  # name -> collection; None: absent (_published)
        self._revs: dict[str, str] = {}  # revisions read from the published version (_published)
        if not create and self.path is not None and not self.has_chunks():
            raise KBError(f"the knowledge base at {self.path} is empty (left by a `kport kb` "
                          "command that failed or was stopped, in an older kport); run "
                          "`kport kb build` to rebuild it")

    @classmethod
    def from_settings(cls, settings, create: bool = False) -> KBStore:
        url = settings.chroma_url
        return cls(None if url else settings.kb_dir, url, settings.embed_model, create=create)

    def has_chunks(self) -> bool:
        """Whether any collection holds a chunk (False before the first write)."""
        return self.client is not None and any(
            c.count() for c in self.client.list_collections() if c.name.startswith(PREFIX))

    def _follow(self) -> None:
        """Open the version the link names now, if a writer elsewhere has published one."""
        if self.path is None or self._writing or self.client is None:
            return
        root = self.path.resolve()
        if root != self._root and (root / "chroma.sqlite3").is_file():
            self._root, self.client, self._cols = root, _client(root, None, False), {}
            self._revs = {}

    def _published(self) -> bool:
        """Whether this handle reads a published local version, which no one writes again:
        every write goes to a fresh version folder (writing()), so what was read of it stays
        true (a missing collection, a revision) until _follow opens a newer one."""
        return self.path is not None and not self._writing and self.client is not None

    @contextlib.contextmanager
    def writing(self) -> Iterator[KBStore]:
        """Make the writes of the block one change: a local store is copied into a fresh
        version folder, written there and published when the block ends without error (a
        failure or kill leaves the previous version); a server is written in place."""
        if self.path is None or self._writing:
            yield self
            return
        link = self.path
        with self.writer_lock():  # one writer at a time, for the whole change
            current = link.resolve() if (link / "chroma.sqlite3").is_file() else None
            stage = link.parent / f".{link.name}.v-{secrets.token_hex(6)}"
            if current is not None:
                shutil.copytree(current, stage, ignore=shutil.ignore_patterns(".kport.lock"))
            else:
                stage.mkdir()
            saved = (self._root, self.client, self._cols)
            self._root, self.client, self._cols, self._writing = stage, _open_new(stage), {}, True
            self._revs = {}
            try:
                yield self
            except BaseException:
                self._root, self.client, self._cols = saved
                shutil.rmtree(stage, ignore_errors=True)
                raise
            finally:
                self._writing = False
            _publish(link, stage)
            for old in _version_dirs(link):  # abandoned stages, and versions before the last
                if old not in (stage, current):
                    shutil.rmtree(old, ignore_errors=True)

    @contextlib.contextmanager
    def writer_lock(self, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold the writer lock of a local store (``.kb.write.lock`` beside it) for the block,
        so that a check and the write it decides on are one step (kb/ready.py builds a missing
        KB under it). ``on_wait`` is called once when another process holds it. Re-entrant
        within this handle; a no-op for a server."""
        if self.path is None or self._write_locked:
            yield
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.parent / f".{self.path.name}.write.lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(lock, fcntl.LOCK_EX)
            self._write_locked = True
            try:
                yield
            finally:
                self._write_locked = False

    # -- locking (local stores only; a server serialises writes itself)
    @contextlib.contextmanager
    def _lock(self, exclusive: bool) -> Iterator[None]:
        if self.path is None:
            yield
            return
        with open(self._root / ".kport.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def collection(self, name: str, create: bool = False):
        """The chromadb collection for ``name``; KBError if it was built with another model."""
        if name not in COLLECTIONS:
            raise KBError(f"unknown collection {name!r}; one of {', '.join(COLLECTIONS)}")
        self._follow()
        if self.client is None:  # no store yet (create=True, before the first write)
            return None
        if self._cols.get(name) is None and (name not in self._cols or create):
            from chromadb.errors import NotFoundError  # lazy: as in _client()

            try:
                col = self.client.get_collection(PREFIX + name, embedding_function=None)
            except (NotFoundError, ValueError):
                if not create:
                    if self._published():  # asked again by every search otherwise (3 ms)
                        self._cols[name] = None
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
        if not names or self.client is None:
            return {n: "0" for n in names}
        self._follow()
        if self._published() and all(n in self._revs for n in names):
            return {n: self._revs[n] for n in names}
        got = self._meta().get(ids=list(names), include=["metadatas"])
        revs = {i: str(m["rev"]) for i, m in zip(got["ids"], got["metadatas"], strict=True)}
        out = {n: revs.get(n, "0") for n in names}
        if self._published():
            self._revs.update(out)
        return out

    def revision(self, name: str) -> str:
        return self.revisions([name])[name]

    def _bump(self, name: str) -> None:
        self._meta().upsert(ids=[name], embeddings=[[0.0]],
                            metadatas=[{"rev": secrets.token_hex(8)}])

    def add(self, chunks: Iterable[Chunk], progress: Callable[[int], None] | None = None,
            batch: int = BATCH) -> dict[str, int]:
        """Store ``chunks`` (same id = same content: never duplicated), all or none (see
        ``writing``). Returns counts: added, present (already stored)."""
        chunks = list(chunks)
        with self.writing():
            return self._add(chunks, progress, batch)

    def _add(self, chunks: list[Chunk], progress, batch: int) -> dict[str, int]:
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
                    # The asked phrasings are embedded now, into the embedding cache, so the
                    # first search (kb.search.BM25Cache, which mixes them into a knowledge
                    # chunk's vector for questions) does not wait for ~1000 of them.
                    self.embedder.short([a for c in new for a in asked_of(c.text)])
                    with self._lock(exclusive=True):
                        col.upsert(ids=[c.id for c in new], embeddings=vecs,
                                   documents=[c.text for c in new],
                                   metadatas=[{**c.metadata, "title": c.title} for c in new])
                        self._bump(name)
                    counts["added"] += len(new)
                if progress:
                    progress(len(part))
        return counts

    def sync(self, chunks: Iterable[Chunk], sources: set[str],
             progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Store ``chunks`` and delete the chunks of ``sources`` not among them, all or none:
        a source made again from newer files (kport's rules after an upgrade) replaces its old
        chunks instead of answering beside them. Counts: added, present, removed."""
        chunks = list(chunks)
        with self.writing():
            counts = self._add(chunks, progress, BATCH)
            counts["removed"] = sum(len(ids) for ids in self._delete(
                self.stale({c.id for c in chunks}, sources)).values())
            return counts

    def stale(self, keep: set[str], sources: set[str]) -> dict[str, list[str]]:
        """The ids of the chunks of ``sources`` that are not in ``keep``, per collection."""
        out = {}
        for name in COLLECTIONS:
            col = self.collection(name)
            if col is None:
                continue
            with self._lock(exclusive=False):
                ids = [i for src in sorted(sources)
                       for i in col.get(where={"source": src}, include=[])["ids"] if i not in keep]
            if ids:
                out[name] = ids
        return out

    def missing(self, chunks: list[Chunk]) -> int:
        """How many of ``chunks`` the store does not hold."""
        out = 0
        for name in COLLECTIONS:
            ids = [c.id for c in chunks if c.collection == name]
            col = self.collection(name) if ids else None
            if ids and col is None:
                out += len(ids)
            elif ids:
                with self._lock(exclusive=False):
                    out += len(ids) - len(col.get(ids=ids, include=[])["ids"])
        return out

    def _delete(self, ids: dict[str, list[str]]) -> dict[str, list[str]]:
        for name, some in ids.items():
            with self._lock(exclusive=True):
                self.collection(name).delete(ids=some)
                self._bump(name)
        return ids

    def remove(self, source: str) -> dict[str, int]:
        """Delete every chunk whose source is ``source``, all or none; counts per collection."""
        with self.writing():
            return self._remove(source)

    def _remove(self, source: str) -> dict[str, int]:
        return {name: len(ids) for name, ids in self._delete(self.stale(set(), {source})).items()}

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
        tmp = Path(dest).with_name(f".{Path(dest).name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w") as fh:
                fh.write(json.dumps({"kport_kb_export": 1, "embed_model": self.embedder.name})
                         + "\n")
                for name in COLLECTIONS:
                    got = self.documents(name, include_embeddings=True)
                    for i, doc, meta, emb in zip(got["ids"], got["documents"], got["metadatas"],
                                                 got["embeddings"], strict=True):
                        fh.write(json.dumps({"collection": name, "id": i, "text": doc,
                                             "metadata": meta, "embedding": emb}) + "\n")
                        n += 1
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, dest)  # a failed export leaves no half file where DEST was
        return n

    def import_file(self, src: Path, progress: Callable[[int], None] | None = None) -> dict:
        """Load an export written by :meth:`export` (read whole first: see read_export).
        Embeddings are reused when the export was made with this store's model, recomputed
        otherwise; all or none is imported. KBError names the bad line."""
        return self.import_records(src, *read_export(src), progress=progress)

    def import_records(self, src: Path, head: dict, chunks: list[Chunk], vectors: list,
                       progress: Callable[[int], None] | None = None) -> dict:
        """Write what read_export read from ``src``; counts: added, present."""
        try:
            with self.writing():
                return self._import(chunks, vectors, head, progress)
        except KBError:
            raise
        except Exception as err:  # noqa: BLE001 - chromadb refusing the data: nothing changed
            raise KBError(f"{src}: the store refused the import ({type(err).__name__}: "
                          f"{str(err)[:200]}); nothing was imported") from None

    def _import(self, chunks: list[Chunk], vectors: list, head: dict, progress) -> dict:
        if head.get("embed_model") != self.embedder.name or None in vectors:
            return self._add(chunks, progress, BATCH)
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
