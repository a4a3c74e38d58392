"""Pairing the CUDA and Metal kernels of one tree (candle, llama.cpp, a kernels repo): by op name
and by what each kernel computes, so that a CUDA kernel's analogue chunk carries its Metal port.

The name: the words of the kernel's name with prefixes, suffixes and data types dropped and
phrases spelled two ways made one (``kernel_soft_max_f32`` and ``softmax_f32`` -> softmax).
The content, read from tree-sitter tokens (never regex): the ops the kernel and the functions it
calls perform, each CUDA and Metal spelling mapped to one op (kb/rules/op_signature.toml), and
the roles of its parameters (buffers, scalars; Metal's thread-position parameters left out).
A pair is made by name and content (names agree, content does not contradict them) or by
content alone (the two are each other's best content match, of the same op category, and the
contents agree closely); names that agree over different content are refused and counted.
"""

from __future__ import annotations

import functools
import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from kb.chunks import Chunk, pair
from kb.features import words
from kb.parse import Function, functions

SIGNATURE_FILE = Path(__file__).resolve().parent / "rules" / "op_signature.toml"
MIN_NAME = 0.5  # word overlap (Jaccard) for a name match
MIN_CONTENT_WITH_NAME = 0.1  # below it, names that agree are refused: the kernels differ
MIN_CONTENT_ALONE = 0.75
_SCALARS = {"int", "uint", "float", "half", "double", "bool", "char", "short", "long", "size_t",
            "int32_t", "int64_t", "uint32_t", "uint64_t", "uint8_t", "int8_t", "ulong", "ushort",
            "uchar", "bfloat", "unsigned", "signed", "int16_t", "uint16_t"}


@functools.cache
def _table() -> dict:
    data = tomllib.loads(SIGNATURE_FILE.read_text())
    exact, prefix = {}, []
    for op, spellings in data["ops"].items():
        for s in spellings:
            if s.endswith("*"):
                prefix.append((s[:-1], op))
            else:
                exact[s] = op
    names = data["names"]
    phrases = sorted(((tuple(k.split()), tuple(v.split())) for k, v in names["phrases"].items()),
                     key=lambda kv: -len(kv[0]))
    return {"exact": exact, "prefix": tuple(prefix), "noise": frozenset(names["noise"]),
            "dtypes": frozenset(names["dtypes"]), "phrases": phrases,
            "common": frozenset(data["content"]["common"])}


def _name_words(name: str) -> list[str]:
    ws, t, out, i = words(name), _table(), [], 0
    while i < len(ws):
        for src, dst in t["phrases"]:
            if tuple(ws[i:i + len(src)]) == src:
                out += dst
                i += len(src)
                break
        else:
            out.append(ws[i])
            i += 1
    return out


def name_key(name: str) -> frozenset[str]:
    """The words that identify an op across languages (``kernel_soft_max_f32`` -> softmax)."""
    t = _table()
    return frozenset(w for w in _name_words(name) if w not in t["noise"] and w not in t["dtypes"])


def name_dtypes(name: str) -> frozenset[str]:
    """The data-type words of a kernel name (``f32``, ``half`` ...)."""
    return frozenset(w for w in _name_words(name) if w in _table()["dtypes"])


def op_of(token: str) -> str | None:
    """The op a CUDA or Metal token performs (``__expf`` and ``exp`` -> exp), or None."""
    t = _table()
    if token in t["exact"]:
        return t["exact"][token]
    return next((op for p, op in t["prefix"] if token.startswith(p)), None)


@dataclass(frozen=True)
class Signature:
    """What a kernel computes: its ops, and its buffer and scalar parameter counts (None when
    unknown: an MLX body has no parameter list, an arguments struct hides its fields)."""

    ops: frozenset[str]
    buffers: int | None = None
    scalars: int | None = None
    names: frozenset[str] = frozenset()  # the words of the identifiers its code uses


def _params(kernel: Function) -> list[list[str]]:
    toks = [t.text for t in kernel.tokens]
    try:
        i = toks.index(kernel.name)
        i = toks.index("(", i)
    except ValueError:
        return []
    params, cur, depth = [], [], 0
    for tok in toks[i + 1:]:
        if tok in ("(", "[", "<", "{", "[["):
            depth += 1
        elif tok in (")", "]", ">", "}", "]]"):
            if depth == 0:
                break
            depth -= 1
        if tok == "," and depth == 0:
            params.append(cur)
            cur = []
        else:
            cur.append(tok)
    return [p for p in [*params, cur] if p and p != ["void"]]


def _roles(kernel: Function) -> tuple[int | None, int | None]:
    buffers = scalars = 0
    for p in _params(kernel):
        attributed = "[[" in p or p.count("[") >= 2
        if attributed and "buffer" not in p:
            continue  # a thread position, threadgroup memory: not an argument
        if "*" in p:
            buffers += 1
        elif "&" in p and not (set(p) & _SCALARS):
            return None, None  # an arguments struct (llama.cpp's ggml_metal_kargs_*)
        else:
            scalars += 1
    return buffers, scalars


def signature(chunk: Chunk) -> Signature:
    """The signature of a kernel chunk, read from its text with tree-sitter."""
    language = str(chunk.metadata.get("language"))
    funcs = functions(chunk.text, language)
    toks = [t.text for f in funcs for t in f.tokens]
    ops = frozenset(op for t in toks if (op := op_of(t)))
    name = str(chunk.metadata.get("kernel", ""))
    # the ops' own spellings are compared as ops, the kernel's name by name_score
    common = _table()["common"] | set(words(name))
    used = frozenset(w for t in toks if (t[:1].isalpha() or t[:1] == "_") and not op_of(t)
                     for w in words(t) if len(w) > 1 and not w.isdigit() and w not in common)
    kernel = next((f for f in reversed(funcs) if f.name == name and f.kind == "kernel"), None)
    if kernel is None or chunk.metadata.get("mlx_body"):
        return Signature(ops, names=used)
    return Signature(ops, *_roles(kernel), names=used)


def content_score(a: Signature, b: Signature) -> float:
    """How alike two signatures are, 0..1: the ops' overlap (smoothed, so two kernels with few
    ops are not called different), the words of the names their code uses (half the words in
    common already scores 1), and the parameter roles where both are known."""
    ops = (len(a.ops & b.ops) + 1) / (len(a.ops | b.ops) + 1)
    union = a.names | b.names
    named = min(1.0, 2 * len(a.names & b.names) / len(union)) if union else 0.0
    if None in (a.buffers, b.buffers):
        return 0.5 * ops + 0.5 * named
    # alike roles only confirm: most kernels take two or three buffers
    roles = 1.0 / (1 + abs(a.buffers - b.buffers) + 0.5 * abs(a.scalars - b.scalars))
    return (0.5 * ops + 0.5 * named) * (0.8 + 0.2 * roles)


def _telling(s: Signature) -> bool:
    """Whether a signature says enough to contradict a name (a kernel whose work happens in
    template arguments or macros parses to almost nothing)."""
    return bool(s.ops) or len(s.names) >= 8


def name_score(a: str, b: str) -> float:
    """Word overlap (Jaccard) of two kernels' name keys, 0..1; 0 when both name a variant
    (a word with a digit: ``q8``, ``1d``) and the variants differ (``q8_0`` is not ``q2_0``)."""
    ka, kb_ = name_key(a), name_key(b)
    va, vb = ({w for w in k if any(ch.isdigit() for ch in w)} for k in (ka, kb_))
    if va and vb and va != vb:
        return 0.0
    return len(ka & kb_) / len(ka | kb_) if ka and kb_ else 0.0


@dataclass
class PairingReport:
    """How the kernels of a tree were paired."""

    cuda: int = 0
    metal: int = 0
    by_name_and_content: int = 0
    by_content: int = 0
    refused: list[tuple[str, str, float]] = field(default_factory=list)  # names alike, content not
    left_out: int | None = None  # unpaired CUDA kernels not stored (None: not decided here)

    @property
    def paired(self) -> int:
        return self.by_name_and_content + self.by_content

    @property
    def unpaired(self) -> int:
        return self.cuda + self.metal - 2 * self.paired

    def line(self) -> str:
        return (f"{self.cuda} CUDA kernels, {self.metal} Metal kernels, {self.paired} paired "
                f"(by name+content: {self.by_name_and_content}, by content only: "
                f"{self.by_content}), {self.unpaired} unpaired"
                + (f"; {len(self.refused)} name matches refused for different content"
                   if self.refused else "")
                + (f"; {self.left_out} unpaired CUDA kernels left out (--keep-unpaired stores "
                   "them)" if self.left_out else ""))

    def as_json(self) -> dict:
        return {"cuda_kernels": self.cuda, "metal_kernels": self.metal, "paired": self.paired,
                "by_name_and_content": self.by_name_and_content, "by_content": self.by_content,
                "unpaired": self.unpaired, "refused": len(self.refused),
                "cuda_left_out": self.left_out or 0}


def _candidates(cuda: list[Chunk], metal: list[Chunk], report: PairingReport):
    sig_c, sig_m = [signature(c) for c in cuda], [signature(m) for m in metal]
    name = [str(c.metadata.get("kernel", "")) for c in cuda]
    mname = [str(m.metadata.get("kernel", "")) for m in metal]
    content = [[content_score(a, b) for b in sig_m] for a in sig_c]
    best_m = [max(range(len(metal)), key=lambda j: row[j]) for row in content]
    best_c = [max(range(len(cuda)), key=lambda i: content[i][j]) for j in range(len(metal))]
    out = []
    for i in range(len(cuda)):
        for j in range(len(metal)):
            n, c = name_score(name[i], mname[j]), content[i][j]
            shared = ", ".join(sorted(sig_c[i].ops & sig_m[j].ops)) or "no ops"
            if n >= MIN_NAME:
                if not (_telling(sig_c[i]) and _telling(sig_m[j])):
                    c = max(c, MIN_CONTENT_WITH_NAME)  # too little parsed to judge: names rule
                elif c < MIN_CONTENT_WITH_NAME:
                    report.refused.append((name[i], mname[j], round(c, 2)))
                    continue
                same_type = name_dtypes(name[i]) == name_dtypes(mname[j])
                conf = 0.6 * n + 0.4 * c + (0.02 if same_type else 0.0)
                out.append((conf, i, j, "name+content",
                            f"names agree ({n:.2f}); content {c:.2f} ({shared})"))
            elif (c >= MIN_CONTENT_ALONE and best_m[i] == j and best_c[j] == i
                  and cuda[i].metadata.get("category") == metal[j].metadata.get("category")
                  not in (None, "other") and sig_c[i].ops):
                out.append((0.8 * c, i, j, "content",
                            f"content {c:.2f} ({shared}), each the other's best; category "
                            f"{cuda[i].metadata.get('category')}; names differ ({n:.2f})"))
    return out


def pair_kernels(cuda: list[Chunk], metal: list[Chunk]) -> tuple[list[Chunk], PairingReport]:
    """The CUDA and Metal kernel chunks, those that port the same op paired (best confidence
    first, each kernel in one pair at most; ``pair_how``, ``pair_confidence`` and
    ``pair_reason`` in their metadata), and how they were paired."""
    report = PairingReport(cuda=len(cuda), metal=len(metal))
    if not cuda or not metal:
        return list(cuda) + list(metal), report
    out_c, out_m = list(cuda), list(metal)
    used_c, used_m = set(), set()
    for conf, i, j, how, reason in sorted(_candidates(cuda, metal, report),
                                          key=lambda x: (-x[0], x[1], x[2])):
        if i in used_c or j in used_m:
            continue
        used_c.add(i)
        used_m.add(j)
        meta = {"pair_how": how, "pair_confidence": round(conf, 3), "pair_reason": reason}
        c, m = pair(cuda[i].with_meta(**meta), metal[j].with_meta(**meta))
        out_c[i], out_m[j] = c, m
        if how == "content":
            report.by_content += 1
        else:
            report.by_name_and_content += 1
    return out_c + out_m, report


def pair_chunks(cuda: list[Chunk], metal: list[Chunk]) -> list[Chunk]:
    """``pair_kernels`` without the report."""
    return pair_kernels(cuda, metal)[0]


def split_of(name: str) -> str:
    """A kernel's fixed half for held-out measurement: ``train`` or ``held``, by a hash."""
    return "held" if hashlib.sha256(name.encode()).digest()[0] % 2 else "train"
