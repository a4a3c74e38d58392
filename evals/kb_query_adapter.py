"""Experiment (issue 18, seventh round): does a fine-tuned question encoder find the rules better?

    python -m evals.kb_query_adapter [--epochs N] [--lr X] [--rank R] [--no-phrasings]
                                     [--workdir DIR]

The shipped search embeds a text question with all-MiniLM-L6-v2 as it is. Here the question
side alone is adapted: low-rank (LoRA) updates to every linear layer of the model, trained with
a contrastive loss that pulls a question towards the rows text questions are compared with
(kb/search.py ``question_vectors``: each rule's, fix's and fact's vector mixed with its asked
phrasings') and away from all the others; the rows themselves stay as built. Training data: the
asked phrasings of the knowledge chunks (unless ``--no-phrasings``), the calibration questions
(evals/data/kb_calibration_questions.toml) and the tune half of the question benchmark.

Measured through the real search (kb.search.search, hybrid, the store `kport kb build` builds)
with only the text question's vector replaced: 5-fold cross-validation over the tune half
(trained on the other four folds, the phrasings and the calibration questions), then trained on
the phrasings and the whole tune half and measured on the calibration questions. The held-out
half is never read here. Results and the choice made from them: docs/kb.md ("A question
encoder fine-tuned").
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np

from evals import bench_kb_questions as bench
from evals.calibrate_kb import QUESTIONS as CALIBRATION
from kb.chunks import asked_of
from kb.embed import resolve_model
from kb.search import BM25Cache

FOLDS = 5
BATCH = 32
TAU = 0.05  # contrastive temperature


def _rows(store, cache: Path) -> tuple[np.ndarray, list[str], list[tuple[str, tuple[str, ...]]]]:
    """(the rows text questions are compared with, each row's rule id, (phrasing, (rule id,)))
    over the knowledge collections."""
    rows, ids, asked = [], [], []
    for name in bench.KNOWLEDGE:
        got = BM25Cache(store, name, cache, store.revisions([name])[name]).load()
        for j, meta in enumerate(got.metadatas):
            rid = meta.get("rule_id") or meta.get("fix_id") or meta.get("arch_id")
            rows.append(got.question_vectors[j])
            ids.append(rid)
            asked += [(a, (rid,)) for a in asked_of(got.texts[j])]
    return np.stack(rows).astype(np.float32), ids, asked


class Encoder:
    """all-MiniLM-L6-v2 with LoRA updates on its linear layers (the base weights frozen)."""

    def __init__(self, rank: int, seed: int):
        # lazy: torch and transformers (~5 s to import) are needed only when training
        import torch
        from transformers import AutoModel, AutoTokenizer

        torch.manual_seed(seed)
        path = resolve_model(None)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path)
        for p in self.model.parameters():
            p.requires_grad_(False)
        for layer in self.model.encoder.layer:
            for parent in (layer.attention.self, layer.attention.output, layer.intermediate,
                           layer.output):
                for name in ("query", "key", "value", "dense"):
                    lin = getattr(parent, name, None)
                    if isinstance(lin, torch.nn.Linear):
                        setattr(parent, name, _lora(lin, rank))

    def encode(self, texts: list[str]):
        batch = self.tok(texts, padding=True, truncation=True, max_length=128,
                         return_tensors="pt")
        out = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        mean = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return self.torch.nn.functional.normalize(mean, dim=-1)


def _lora(lin, rank: int):
    import torch  # lazy: as in Encoder

    class LoRA(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.scale = lin, 2.0
            self.a = torch.nn.Parameter(torch.randn(rank, lin.in_features) * 0.01)
            self.b = torch.nn.Parameter(torch.zeros(lin.out_features, rank))

        def forward(self, x):
            return self.lin(x) + (x @ self.a.T @ self.b.T) * self.scale

    return LoRA()


def train(examples: list[tuple[str, tuple[str, ...]]], rows: np.ndarray, ids: list[str], *,
          epochs: int, lr: float, rank: int, seed: int = 0) -> Encoder:
    """An encoder trained so that each example's text is nearest the rows of its rule ids."""
    enc = Encoder(rank, seed)
    torch = enc.torch
    table = torch.tensor(rows)
    where: dict[str, list[int]] = {}
    for j, rid in enumerate(ids):
        where.setdefault(rid, []).append(j)
    params = [p for p in enc.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    order = list(examples)
    rng = random.Random(seed)
    enc.model.train()
    for _ in range(epochs):
        rng.shuffle(order)
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            logits = enc.encode([t for t, _ in batch]) @ table.T / TAU
            positive = torch.full_like(logits, float("-inf"))
            for i, (_, labels) in enumerate(batch):
                for j in (j for rid in labels for j in where.get(rid, [])):
                    positive[i, j] = 0.0
            loss = (torch.logsumexp(logits, 1) - torch.logsumexp(logits + positive, 1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    enc.model.eval()
    return enc


def measure(store, cache: Path, questions: list[tuple[str, tuple[str, ...]]],
            enc: Encoder | None) -> np.ndarray:
    """(recall@1, recall@3, MRR) through the real search; ``enc`` embeds the text question
    (None: the shipped model)."""
    shipped = store.embedder.query
    if enc is not None:
        def query(text: str, max_tokens: int | None = None) -> list[float]:
            if max_tokens is not None:  # a CUDA-code query: as shipped
                return shipped(text, max_tokens)
            with enc.torch.no_grad():
                return enc.encode([text])[0].numpy().tolist()
        store.embedder.query = query
    try:
        got = bench.recall(store, [bench.Question(t, "", r, "tune") for t, r in questions],
                           cache)["tune"]
    finally:
        store.embedder.query = shipped
    return np.array(got[:3])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals.kb_query_adapter",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--no-phrasings", action="store_true",
                    help="train on the labelled questions only")
    ap.add_argument("--workdir", type=Path, help="where the store is built (default: a temp "
                    "folder)")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kport-adapter-"))
    store, cache = bench.knowledge_store(work / "store"), work / "cache"
    rows, ids, asked = _rows(store, cache)
    known = bench.known_rule_ids()
    calib = [(q["text"], tuple(a for a in q["answers"] if a in known))
             for q in tomllib.loads(CALIBRATION.read_text())["q"]]
    calib = [(t, a) for t, a in calib if a]
    tune = [(q.text, q.rules) for q in bench.load_questions() if q.split == "tune"]
    phrasings = [] if args.no_phrasings else asked
    cfg = {"epochs": args.epochs, "lr": args.lr, "rank": args.rank}
    folds = [tune[i::FOLDS] for i in range(FOLDS)]
    adapted, shipped = np.zeros(3), np.zeros(3)
    for k, fold in enumerate(folds):
        rest = [q for i, f in enumerate(folds) if i != k for q in f]
        enc = train(phrasings + calib + rest, rows, ids, **cfg)
        adapted += measure(store, cache, fold, enc) * len(fold)
        shipped += measure(store, cache, fold, None) * len(fold)
        print(f"fold {k + 1}/{FOLDS} done", file=sys.stderr, flush=True)
    enc = train(phrasings + tune, rows, ids, **cfg)
    print(f"training: {len(phrasings)} phrasings, {len(calib)} calibration questions, "
          f"{len(tune)} tune questions; {cfg}")
    table = [("tune, 5-fold", "adapted", adapted / len(tune)),
             ("tune, 5-fold", "shipped", shipped / len(tune)),
             ("calibration", "adapted", measure(store, cache, calib, enc)),
             ("calibration", "shipped", measure(store, cache, calib, None))]
    print("| questions | encoder | recall@1 | recall@3 | MRR |\n|---|---|---|---|---|")
    for questions, encoder, got in table:
        print(f"| {questions} | {encoder} | " + " | ".join(f"{v:.3f}" for v in got) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
