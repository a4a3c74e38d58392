"""The unit of the knowledge base: a Chunk (one rule, one fact, one kernel, one doc section),
its content-hash id, and the chunks made from kb/rules (concept, architecture and fix rules).

Collections: rules, arch, analogues (kernels, with their counterpart when a CUDA/Metal pair is
known), docs, fixes. Ids hash the collection, language and text, so re-adding the same content
never duplicates it; metadata values are scalars because chromadb stores only those.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from kb import arch
from kb.concepts import also_called, load_rules
from kb.features import words
from kb.fixes import load_fixes

COLLECTIONS = ("rules", "arch", "analogues", "docs", "fixes")
RULES = "kport-rules"  # the source of the chunks made from kb/rules
MAX_TEXT = 30_000

Meta = dict[str, str | int | float | bool]


@dataclass(frozen=True)
class Chunk:
    collection: str
    title: str
    text: str
    metadata: Meta = field(default_factory=dict)

    @property
    def id(self) -> str:
        key = "\0".join((self.collection, str(self.metadata.get("language", "")), self.text))
        return hashlib.sha256(key.encode()).hexdigest()[:24]

    def with_meta(self, **extra: str | int | float | bool) -> Chunk:
        return Chunk(self.collection, self.title, self.text, {**self.metadata, **extra})


def pair(cuda: Chunk, metal: Chunk) -> tuple[Chunk, Chunk]:
    """The two sides of a known CUDA -> Metal port, each pointing at the other's id."""
    return (cuda.with_meta(pair_id=metal.id, pair_role="cuda"),
            metal.with_meta(pair_id=cuda.id, pair_role="metal"))


def rule_chunks(source: str = RULES) -> list[Chunk]:
    """One chunk per concept rule: construct, Metal form, the glossary's plain words for its
    spellings, notes, pitfalls and the example."""
    out = []
    for r in load_rules():
        aka = also_called(*r.cuda, r.metal, r.title)
        text = "\n".join([
            r.title, f"CUDA: {', '.join(r.cuda)}", f"Metal: {r.metal}",
            *([f"Also called: {'; '.join(aka)}"] if aka else []), r.notes,
            *(f"Pitfall: {p}" for p in r.pitfalls), *asked_lines(r.asked),
            "CUDA example:", r.example.cuda.strip(), "Metal example:", r.example.metal.strip()])
        out.append(Chunk("rules", r.title, text, {
            "source": source, "rule_id": r.id, "group": r.group, "language": "rule",
            "metal_form": r.metal, "cuda_constructs": " | ".join(r.cuda),
            "unconfirmed": r.unconfirmed, "origin": r.source}))
    return out


def arch_chunks(source: str = RULES) -> list[Chunk]:
    """One chunk per chip, per architecture feature and per GPU family."""
    out = []
    for c in arch.chips():
        text = (f"Apple {c.name} GPU: {c.gpu_cores} cores, family {c.family}, MLX arch "
                f"{c.mlx_arch or 'unknown'}; memory bandwidth "
                f"{c.bandwidth_gbs if c.bandwidth_gbs is not None else 'not published'} GB/s; "
                f"FP32 {c.fp32_note or c.fp32_tflops or 'not published'} TFLOPS; FP16:FP32 "
                f"{c.fp16_to_fp32 or 'not published'}. Sources: {', '.join(c.sources)}.")
        out.append(Chunk("arch", f"chip {c.name}", text, {
            "source": source, "arch_id": f"chip:{c.name}", "family": c.family,
            "language": "arch", "unconfirmed": c.unconfirmed}))
    for f in arch.features():
        out.append(Chunk("arch", f"{f.id}: {f.fact[:80]}", "\n".join([
                         f"{f.fact}\nApplies: {f.applies}. Sources: {', '.join(f.sources)}.",
                         *asked_lines(f.asked)]), {
                             "source": source, "arch_id": f.id, "language": "arch"}))
    for fam in arch.families():
        lines = [f"GPU family {fam.name}"]
        for key, v in fam.model_dump().items():
            if isinstance(v, dict) and "value" in v:
                flag = " (unconfirmed)" if v.get("unconfirmed") else ""
                note = f"; {v['note']}" if v.get("note") else ""
                lines.append(f"{key}: {v['value']} [{', '.join(v['sources'])}]{flag}{note}")
            elif key != "name" and v not in ("", [], None):
                lines.append(f"{key}: {', '.join(map(str, v)) if isinstance(v, list) else v}")
        out.append(Chunk("arch", f"family {fam.name}", "\n".join(lines), {
            "source": source, "arch_id": f"family:{fam.name}", "language": "arch",
            "unconfirmed": bool(getattr(fam, "unconfirmed", False))}))
    return out


def fix_chunks(source: str = RULES) -> list[Chunk]:
    """One chunk per fix rule: the error it recognises and the fix."""
    out = []
    for f in load_fixes():
        aka = also_called(f.title)
        text = "\n".join([f.title, f"Error: {f.example_error}", f"Fix: {f.fix}",
                          *([f"Also called: {'; '.join(aka)}"] if aka else []),
                          *asked_lines(f.asked)])
        out.append(Chunk("fixes", f.title, text, {
            "source": source, "fix_id": f.id, "origin": f.origin, "language": "fix",
            "unconfirmed": f.unconfirmed}))
    return out


ASKED = "Asked: "  # opens a line holding one way the chunk's question is asked


def asked_lines(asked: list[str]) -> list[str]:
    """A rule's, fix's or fact's ``asked`` phrasings as lines of its chunk text: in the text,
    so BM25 reads them and a changed phrasing changes the chunk's id (a rebuilt store picks it
    up); search also embeds each one alone (kb.search, the "asked" channel)."""
    return [ASKED + " ".join(a.split()) for a in asked]


def asked_of(text: str) -> list[str]:
    """The phrasings written into a knowledge chunk's text by asked_lines."""
    return [x[len(ASKED):] for x in text.split("\nCUDA example:", 1)[0].split("\n")
            if x.startswith(ASKED)]


def without_asked(text: str) -> str:
    """A chunk's text without its asked lines: what is shown as the answer."""
    return "\n".join(x for x in text.split("\n") if not x.startswith(ASKED))


def prose_of(title: str, text: str) -> str:
    """The words of a knowledge chunk (rule, fix, fact) that say what it is about: its title and
    text without the lines that spell code (``CUDA:``, ``Metal:``) and without the examples.
    A question in words matches these; in the whole text its words weigh less beside the
    code."""
    lines = text.split("\nCUDA example:", 1)[0].split("\n")
    if lines[0] == title:  # rules and fixes open with their title
        lines = lines[1:]
    return "\n".join([title, *(x for x in lines if not x.startswith(("CUDA: ", "Metal: ")))])


def name_terms(kernel: str, path: str = "", title: str = "") -> list[str]:
    """Words that name what a chunk is: its kernel name, file stem and title, split at ``_`` and
    camelCase, with adjacent words also joined (``soft_max`` -> soft, max, softmax)."""
    out: list[str] = []
    for part in (kernel, path.rsplit("/", 1)[-1].rsplit(".", 1)[0], title):
        ws = [w for w in words(part) if len(w) > 1]
        out += ws + [a + b for a, b in zip(ws, ws[1:], strict=False)]
    return out


def embed_text(title: str, text: str, meta: dict) -> str:
    """What the dense index embeds: a language-neutral head (name words, category, features,
    intrinsics) before the text, because the model reads only the first 256 tokens."""
    head = [title]
    if meta.get("kernel"):
        head.append(" ".join(name_terms(str(meta["kernel"]))))
    for key in ("category", "features", "intrinsics"):
        if meta.get(key):
            head.append(f"{key}: {str(meta[key]).replace(',', ', ')}")
    return "\n".join(head) + "\n" + text
