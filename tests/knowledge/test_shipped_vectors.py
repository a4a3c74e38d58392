"""The vectors kport ships for its default knowledge base (kb.embed.ShippedVectors): they cover
exactly the texts a build embeds, they are the model's own vectors, a first build reads them
instead of loading the model, and a damaged file is said once and embedding goes on."""

import json
import os
import subprocess
import sys

import numpy as np

from kb import embed
from kb.embed import Embedder, shipped_file, text_key
from kb.shipped_vectors import default_texts


def test_the_shipped_file_covers_exactly_the_texts_a_build_embeds():
    path = shipped_file(Embedder().path)
    assert path.is_file(), f"no shipped vectors for the default model: run python -m " \
                           f"kb.shipped_vectors (expected {path})"
    documents, asked = default_texts()
    with np.load(path) as data:
        keys = {k.tobytes() for k in data["keys"]}
        assert data["vectors"].shape == (len(keys), 384) and data["vectors"].dtype == np.float32
    want = {text_key(t) for t in documents + asked}
    assert keys == want, (f"{len(want - keys)} texts of the default KB have no shipped vector "
                          f"and {len(keys - want)} vectors no text: run python -m "
                          "kb.shipped_vectors after changing a rule, fact, fix rule or case")


def test_the_shipped_vectors_are_the_models_own(tmp_path, monkeypatch):
    monkeypatch.setenv("KPORT_EMBED_CACHE", str(tmp_path / "embed"))  # nothing cached
    documents, asked = default_texts()
    sample_docs, sample_asked = documents[::97][:4], asked[::211][:4]
    shipped = Embedder().shipped.get(sample_docs + sample_asked)
    fresh = Embedder()
    fresh.shipped = None
    computed = fresh.documents(sample_docs) + fresh.short(sample_asked)
    for text, a, b in zip(sample_docs + sample_asked, shipped, computed, strict=True):
        assert a is not None, text[:80]
        assert float(np.dot(a, b)) > 0.9999, text[:80]


FIRST_BUILD = """
import json, sys
from pathlib import Path
from kb.ready import default_chunks
from kb.store import KBStore
store = KBStore(Path(sys.argv[1]), create=True)
counts = store.add(default_chunks())
print(json.dumps({**counts, "model_loaded": "sentence_transformers" in sys.modules}))
"""


def test_a_first_build_reads_the_shipped_vectors_and_loads_no_model(tmp_path):
    env = {**os.environ, "KPORT_EMBED_CACHE": str(tmp_path / "embed"),
           "KPORT_HOME": str(tmp_path / "home")}
    ran = subprocess.run([sys.executable, "-c", FIRST_BUILD, str(tmp_path / "kb")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["added"] > 300 and out["present"] == 0
    assert not out["model_loaded"]  # every text of the default KB came from the shipped file


def test_a_damaged_shipped_file_is_said_once_and_embedding_goes_on(tmp_path, monkeypatch,
                                                                     capsys):
    monkeypatch.setenv("KPORT_EMBED_CACHE", str(tmp_path / "embed"))
    monkeypatch.setattr(embed, "SHIPPED_VECTORS", tmp_path / "vectors")
    e = Embedder()
    damaged = shipped_file(e.path)
    assert damaged.parent == tmp_path / "vectors"  # never the installed file
    damaged.parent.mkdir()
    damaged.write_bytes(b"not a numpy file")
    vecs = e.documents(["shared memory bank conflicts"]) + e.short(["warp reduction in Metal"])
    assert len(vecs) == 2 and all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in vecs)
    err = capsys.readouterr().err
    assert err.count("shipped vectors") == 1 and "cannot be read" in err
