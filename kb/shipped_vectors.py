"""Make the vectors kport ships for its default knowledge base (kb.embed.ShippedVectors).

``python -m kb.shipped_vectors`` writes ``kb/vectors/<model digest>.npz`` for the default model:
one vector for every text ``kport kb build`` embeds (each rule, fact, fix rule and corpus pair
as kb.chunks.embed_text gives it, and each asked phrasing), no other. Run it after changing a
rule, fact, fix rule or corpus case; tests/knowledge/test_shipped_vectors.py fails while the
file is out of date. Vectors of texts that did not change are kept as they were (the file then
changes only where the texts did); the others are computed as a build would compute them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from kb.chunks import asked_of, embed_text
from kb.embed import Embedder, ShippedVectors, shipped_file, text_key


def default_texts() -> tuple[list[str], list[str]]:
    """(documents, asked phrasings): what building the default KB embeds, each once, sorted."""
    from kb.ready import default_chunks  # lazy: it loads the corpus

    chunks = default_chunks()
    documents = {embed_text(c.title, c.text, c.metadata) for c in chunks}
    asked = {a for c in chunks for a in asked_of(c.text)} - documents
    return sorted(documents), sorted(asked)


def make() -> tuple[Path, int, int]:
    """Write the default model's file; (its path, vectors kept, vectors computed)."""
    embedder = Embedder()
    path = shipped_file(embedder.path)
    documents, asked = default_texts()
    old = ShippedVectors(path) if path.is_file() else None
    embedder.shipped = None  # compute what is not kept, never read it back from the old file
    kept: dict[str, list[float]] = {}
    if old is not None:
        for text, vec in zip(documents + asked, old.get(documents + asked), strict=True):
            if vec is not None:
                kept[text] = vec
    todo_docs = [t for t in documents if t not in kept]
    todo_asked = [t for t in asked if t not in kept]
    computed = dict(zip(todo_docs, embedder.documents(todo_docs), strict=True))
    computed |= dict(zip(todo_asked, embedder.short(todo_asked), strict=True))
    rows = sorted(((text_key(t), np.asarray(v, np.float32))
                   for t, v in (kept | computed).items()), key=lambda row: row[0])
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, keys=np.frombuffer(b"".join(k for k, _ in rows), np.uint8).reshape(-1, 32),
             vectors=np.stack([v for _, v in rows]))
    tmp.replace(path)
    for other in path.parent.glob("*.npz"):  # another model version's: nothing reads it
        if other != path:
            other.unlink()
    return path, len(kept), len(computed)


def main() -> int:
    path, kept, computed = make()
    print(f"{path}: {kept + computed} vectors ({kept} kept, {computed} computed)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
