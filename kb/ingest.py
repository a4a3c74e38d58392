"""Ingestion: files, folders and checkouts -> chunks, with tree-sitter (never regex parsing).

CUDA (.cu/.cuh) and Metal (.metal): one chunk per kernel, holding the kernel and the functions it
calls (from its own file, else from a uniquely named function elsewhere in the same add).
Python: one chunk per ``metal_kernel(...)`` call with a literal source. Markdown and RST: one
chunk per section. Binary, undecodable, huge and malformed files are skipped with a reason and
counted; other file types are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docutils.core
import docutils.nodes

from corpus.cases import discover
from kb.chunks import MAX_TEXT, Chunk, pair
from kb.features import chunk_features
from kb.pairing import pair_chunks  # noqa: F401  (kept importable from here)
from kb.parse import (
    MALFORMED_ERROR_SHARE,
    Function,
    error_share,
    functions,
    kernel_closure,
    parse,
    python_metal_kernels,
)

SUFFIXES = {".cu": "cuda", ".cuh": "cuda", ".metal": "metal", ".py": "python",
            ".md": "markdown", ".markdown": "markdown", ".rst": "rst"}
MAX_FILE_BYTES = 2_000_000
SKIP_DIRS = {"__pycache__", "node_modules", ".git", ".venv", "build"}
DOC_CHUNK_CHARS = 2400


@dataclass
class IngestReport:
    """What an ingestion saw: files used, chunks made, files skipped (path, reason)."""

    files: int = 0
    chunks: int = 0
    ignored: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    pairs: int = 0

    def merge(self, other: IngestReport) -> None:
        self.files += other.files
        self.chunks += other.chunks
        self.ignored += other.ignored
        self.skipped += other.skipped
        self.pairs += other.pairs


def walk(root: Path) -> Iterator[Path]:
    """Files under ``root`` (or ``root`` itself), sorted, hidden and build folders left out."""
    if root.is_file():
        yield root
        return
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).parts
        if any(part in SKIP_DIRS or part.startswith(".") for part in rel[:-1]):
            continue
        if p.is_file() and not p.name.startswith("."):
            yield p


def read_text(path: Path) -> tuple[str | None, str]:
    """The file's text, or None and why it is skipped (binary, not UTF-8, too big)."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            return None, f"too big ({size} bytes > {MAX_FILE_BYTES})"
        data = path.read_bytes()
    except OSError as err:
        return None, f"unreadable: {err.strerror or err}"
    if b"\0" in data[:8192]:
        return None, "binary (NUL bytes)"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as err:
        return None, f"not UTF-8 text (byte {err.start})"


def _malformed(text: str, language: str, funcs: list[Function]) -> bool:
    grammar = "cpp" if language == "metal" else language
    return not funcs and error_share(parse(text.encode(), grammar)) > MALFORMED_ERROR_SHARE


def kernel_chunk(kernel: Function, table: dict[str, Function], language: str, rel: str,
                 source: str) -> Chunk:
    closure = kernel_closure(kernel, table)
    text = "\n\n".join(f.text for f in closure)[:MAX_TEXT]
    meta = {"source": source, "path": rel, "language": language, "kernel": kernel.name,
            "start_line": kernel.start_line, "end_line": kernel.end_line,
            **chunk_features(closure)}
    return Chunk("analogues", f"{kernel.name} ({language}, {rel}:{kernel.start_line})", text,
                 meta)


def code_chunks(text: str, language: str, rel: str, source: str,
                shared: dict[str, Function] | None = None,
                funcs: list[Function] | None = None) -> list[Chunk]:
    """One chunk per kernel of a CUDA or Metal source."""
    funcs = functions(text, language) if funcs is None else funcs
    table = {**(shared or {}), **{f.name: f for f in funcs if f.kind != "kernel"}}
    return [kernel_chunk(f, table, language, rel, source) for f in funcs if f.kind == "kernel"]


def body_chunk(name: str, body: str, header: str, rel: str, source: str, line: int = 1,
               title: str = "") -> Chunk:
    """A chunk for an MLX ``metal_kernel`` body (plus header), features read from both."""
    wrapped = f"{header}\nkernel void {name}() {{\n{body}\n}}\n"
    funcs = functions(wrapped, "metal")
    kernel = next((f for f in funcs if f.name == name), None)
    meta: dict = {"source": source, "path": rel, "language": "metal", "kernel": name,
                  "start_line": line, "end_line": line + body.count("\n"), "mlx_body": True}
    if kernel is not None:
        table = {f.name: f for f in funcs if f is not kernel}
        meta.update(chunk_features(kernel_closure(kernel, table)))
    text = (f"// header\n{header.strip()}\n// body\n{body.strip()}" if header.strip()
            else body.strip())
    return Chunk("analogues", title or f"{name} (metal_kernel, {rel}:{line})", text[:MAX_TEXT],
                 meta)


def python_chunks(text: str, rel: str, source: str) -> list[Chunk]:
    return [body_chunk(k.name, k.source, k.header, rel, source, k.line)
            for k in python_metal_kernels(text)]


def _split(text: str, limit: int = DOC_CHUNK_CHARS) -> list[str]:
    parts, cur = [], ""
    for para in text.split("\n\n"):
        if cur and len(cur) + len(para) > limit:
            parts.append(cur)
            cur = ""
        cur = f"{cur}\n\n{para}" if cur else para
    return [*parts, cur] if cur.strip() else parts


def markdown_chunks(text: str, rel: str, source: str) -> list[Chunk]:
    """One chunk per Markdown section (heading path as title), long sections split by
    paragraph."""
    data = text.encode()
    root = parse(data, "markdown")
    out: list[Chunk] = []

    def visit(node, path: list[str]) -> None:
        heading, own = None, []
        for c in node.children:
            if c.type in ("atx_heading", "setext_heading"):
                inline = next((x for x in c.children if x.type in ("inline", "paragraph")), c)
                heading = data[inline.start_byte:inline.end_byte].decode().strip()
            elif c.type != "section":
                own.append(data[c.start_byte:c.end_byte].decode())
        here = [*path, heading] if heading else path
        body = "".join(own).strip()
        if body:
            title = " > ".join(here) or rel
            for i, piece in enumerate(_split(body)):
                out.append(Chunk("docs", title, f"{title}\n\n{piece}", {
                    "source": source, "path": rel, "language": "markdown",
                    "start_line": node.start_point[0] + 1, "part": i}))
        for c in node.children:
            if c.type == "section":
                visit(c, here)

    visit(root, [])
    return out


def rst_chunks(text: str, rel: str, source: str) -> list[Chunk]:
    """One chunk per reStructuredText section, parsed by docutils."""
    doc = docutils.core.publish_doctree(text, settings_overrides={
        "report_level": 5, "halt_level": 5, "warning_stream": False, "file_insertion_enabled":
        False, "raw_enabled": False})
    out: list[Chunk] = []

    def visit(node, path: list[str]) -> None:
        title = next((c.astext() for c in node.children if c.tagname == "title"), None)
        here = [*path, title] if title else path
        body = "\n\n".join(c.astext() for c in node.children
                           if c.tagname not in ("title", "section")).strip()
        if body:
            name = " > ".join(here) or rel
            for i, piece in enumerate(_split(body)):
                out.append(Chunk("docs", name, f"{name}\n\n{piece}", {
                    "source": source, "path": rel, "language": "rst",
                    "start_line": node.line or 1, "part": i}))
        for c in node.children:
            if isinstance(c, docutils.nodes.section):
                visit(c, here)

    visit(doc, [])
    return out


def ingest(root: Path, source: str | None = None) -> tuple[list[Chunk], IngestReport]:
    """Chunks of every supported file under ``root``; ``source`` names them for ``kb remove``
    (default: the resolved path)."""
    root = Path(root)
    source = source or str(root.resolve())
    report, chunks = IngestReport(), []
    parsed: list[tuple[str, str, str, list[Function]]] = []
    for path in walk(root):
        language = SUFFIXES.get(path.suffix.lower())
        if language is None:
            report.ignored += 1
            continue
        rel = str(path.relative_to(root)) if root.is_dir() else path.name
        text, why = read_text(path)
        if text is None:
            report.skipped.append((str(path), why))
            continue
        try:
            if language in ("cuda", "metal"):
                funcs = functions(text, language)
                if _malformed(text, language, funcs):
                    report.skipped.append((str(path), "malformed: does not parse as "
                                           f"{language}"))
                    continue
                parsed.append((text, language, rel, funcs))
            elif language == "python":
                chunks += python_chunks(text, rel, source)
            elif language == "markdown":
                chunks += markdown_chunks(text, rel, source)
            else:
                chunks += rst_chunks(text, rel, source)
        except (RecursionError, ValueError) as err:
            report.skipped.append((str(path), f"malformed: {err}"))
            continue
        report.files += 1
    shared = _unique_functions(parsed)
    for text, language, rel, funcs in parsed:
        chunks += code_chunks(text, language, rel, source, shared.get(language, {}), funcs)
    report.chunks = len(chunks)
    return chunks, report


def _unique_functions(parsed) -> dict[str, dict[str, Function]]:
    seen: dict[str, dict[str, list[Function]]] = {}
    for _, language, _, funcs in parsed:
        for f in funcs:
            if f.kind != "kernel":
                seen.setdefault(language, {}).setdefault(f.name, []).append(f)
    return {lang: {n: fs[0] for n, fs in table.items() if len(fs) == 1}
            for lang, table in seen.items()}


def case_chunks(case, source: str = "corpus") -> list[Chunk]:
    """The CUDA kernel of a corpus case and its expert Metal port, as a pair."""
    folder = Path(case.folder)
    rel = f"{folder.name}/{case.cuda.source}"
    kname = case.cuda.kernel.split("<")[0]
    funcs = functions((folder / case.cuda.source).read_text(), "cuda")
    table = {f.name: f for f in funcs if f.kind != "kernel"}
    kernel = next((f for f in funcs if f.name == kname), None)
    if kernel is None or case.metal is None:
        return []
    title = f"{case.title} [{case.id}]"
    c = kernel_chunk(kernel, table, "cuda", rel, source)
    c = Chunk("analogues", f"{title} (CUDA)", c.text, {**c.metadata, "category": case.category,
                                                        "case": case.id})
    header = (folder / case.metal.header).read_text() if case.metal.header else ""
    m = body_chunk(kname, (folder / case.metal.source).read_text(), header,
                   f"{folder.name}/{case.metal.source}", source, title=f"{title} (Metal)")
    m = m.with_meta(category=case.category, case=case.id)
    return list(pair(c, m))


def corpus_chunks(root: Path | None = None, skip: set[str] = frozenset()) -> list[Chunk]:
    """Pairs from every corpus case (the bundled corpus by default), except ``skip`` ids."""
    return [ch for case in discover(root) if case.id not in skip for ch in case_chunks(case)]
