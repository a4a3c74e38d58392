"""`kport kb`: build, grow, query and move the knowledge base.

    kport kb build [--corpus DIR]            rules, architecture, fixes and corpus pairs
    kport kb add PATH [--source NAME]        a file, folder or checkout (CUDA and Metal kernels
                                             of one tree are paired by op name and content;
                                             [--keep-unpaired] keeps CUDA ones with no port)
    kport kb add-pairs CUDA_DIR METAL_DIR    the same pairing across two folders
    kport kb import-llama-cpp ARCHIVE_OR_DIR llama.cpp's ggml-cuda / ggml-metal kernels as pairs
    kport kb remove SOURCE | stats | export FILE [--force] | import FILE
    kport kb search QUERY|@FILE [--kind K] [-k N] [--json]   answers, with a calibrated score
    kport kb rules FILE.cu [--kernel NAME] [--json]
    kport kb lint BODY.metal [--header H] [--threadgroup 256,1,1] [--chip M2] [--json]
    kport kb fixes "ERROR MESSAGE" [--json]  pattern matches, then retrieval over the KB

The store is $KPORT_HOME/kb, or the Chroma server at KPORT_CHROMA_URL (--url); `kb search`
builds a missing local store first (kb/ready.py). Every change
(build, add, import, remove) is all or nothing: a local store is rebuilt beside the old one and
swapped in on success (kb/store.py); an import is read and checked whole before the store is
opened. Machine-readable output goes to stdout; progress and warnings go to stderr.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from kb.answers import answers, render
from kb.chunks import COLLECTIONS, RULES
from kb.features import FEATURES
from kb.fix_search import merged_fixes, retrieve_fixes
from kb.ingest import SUFFIXES, IngestReport, ingest
from kb.lints import lint_metal
from kb.llama_cpp import import_llama_cpp
from kb.pairing import PairingReport, pair_kernels
from kb.ready import default_chunks, ready_store
from kb.rules_match import rules_for_file
from kb.search import METHODS, require_query
from kb.search import search as search_store
from kb.store import KBError, KBStore, read_export
from runners.cli_options import define_option, include_option
from runners.errors import KportError
from runners.settings import load_settings

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True,
                  help=__doc__.splitlines()[0])
URL = typer.Option(None, "--url", help="a Chroma server (http://host:port) instead of the "
                   "local store")
JSON = typer.Option(False, "--json", help="print JSON")


def _settings(url: str | None):
    return load_settings({"chroma_url": url} if url else None)


def _store(url: str | None, create: bool = False):
    return KBStore.from_settings(_settings(url), create=create)


def _err():
    return Console(stderr=True, highlight=False)


def _add(chunks, report=None, url: str | None = None, as_json: bool = False,
         label: str = "embedding", pairing: PairingReport | None = None,
         replace: set[str] = frozenset()) -> None:
    console = _err()
    for path, why in (report.skipped if report else []):
        console.print(f"[yellow]skipped[/] {escape(path)}: {escape(why)}")
    if pairing is not None:
        console.print(escape(pairing.line()))
    store = _store(url, create=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(label, total=len(chunks))
        counts = (store.sync(chunks, set(replace), lambda n: bar.advance(task, n)) if replace
                  else store.add(chunks, progress=lambda n: bar.advance(task, n)))
    out = {**counts, "chunks": len(chunks), "location": store.location}
    if report is not None:
        out.update(files=report.files, skipped=len(report.skipped), ignored=report.ignored,
                   pairs=report.pairs)
    if pairing is not None:
        out["pairing"] = pairing.as_json()
    if as_json:
        print(json.dumps(out))
    else:
        extra = (f" from {report.files} files ({len(report.skipped)} skipped, "
                 f"{report.pairs} pairs)" if report and report.files else
                 f" (rules, architecture facts, fix rules and {report.pairs} corpus pairs)"
                 if report else "")
        gone = (f", {out['removed']} outdated removed" if out.get("removed") else "")
        console.print(f"{out['added']} chunks added, {out['present']} already present{gone}"
                      f"{extra} -> {store.location}")


@app.command()
def build(corpus: Path = typer.Option(None, help="a corpus folder other than the bundled one"),
          url: str = URL, as_json: bool = JSON):
    """Build the default KB: concept, architecture and fix rules plus the corpus's pairs
    (replacing what an earlier kport stored of them; other sources are kept)."""
    chunks = default_chunks(corpus)
    report = IngestReport(files=0, chunks=len(chunks),
                          pairs=sum(c.metadata.get("pair_role") == "cuda" for c in chunks))
    # kport's own rules (and the bundled corpus) replace what an earlier kport stored of them
    _add(chunks, report, url, as_json, "building the knowledge base",
         replace={RULES} | ({"corpus"} if corpus is None else set()))


KEEP = typer.Option(False, "--keep-unpaired", help="also store the CUDA kernels that found no "
                    "Metal counterpart (left out by default: with no port to show they crowd "
                    "out answers; docs/kb.md)")


@app.command()
def add(path: Path = typer.Argument(..., help="a file, folder or checkout"),
        source: str = typer.Option(None, help="name for `kb remove` (default: the path)"),
        keep_unpaired: bool = KEEP, url: str = URL, as_json: bool = JSON):
    """Add CUDA, Metal, Python metal_kernel, Markdown and RST files; a tree holding both CUDA
    and Metal kernels (Metal also as metal_kernel sources in Python) gets them paired by op name
    and content, and says how many were paired and how."""
    if not path.exists():
        raise KportError(f"{path}: no such file or folder")
    chunks, report = ingest(path, source)
    if not report.files and not report.skipped:
        raise KportError(f"{path}: no file to add (kinds read: {' '.join(sorted(SUFFIXES))})")
    if not report.files:  # not a silent "0 chunks added": the user asked for these files
        where, why = report.skipped[0]
        more = f" and {len(report.skipped) - 1} more" if len(report.skipped) > 1 else ""
        raise KportError(f"{path}: nothing to add: every file was skipped ({where}: {why}"
                         f"{more})")
    cuda, metal, other = _by_language(chunks)
    if not (cuda and metal):  # one language: nothing to pair
        _add(chunks, report, url, as_json)
        return
    paired, pairing = pair_kernels(cuda, metal)
    _add_paired(paired + other, pairing, report, keep_unpaired, url, as_json)


def _by_language(chunks):
    """The CUDA kernel chunks, the Metal ones, and the rest."""
    cuda = [c for c in chunks if c.metadata.get("language") == "cuda"]
    metal = [c for c in chunks if c.metadata.get("language") == "metal"]
    return cuda, metal, [c for c in chunks if c.metadata.get("language") not in ("cuda",
                                                                                 "metal")]


def _add_paired(chunks, pairing: PairingReport, report: IngestReport, keep_unpaired: bool,
                url: str | None, as_json: bool) -> None:
    """Store paired kernels, the CUDA ones without a counterpart only when ``keep_unpaired``."""
    if not keep_unpaired:
        pairing.left_out = sum(c.metadata.get("language") == "cuda" and "pair_id" not in
                               c.metadata for c in chunks)
        chunks = [c for c in chunks if c.metadata.get("language") != "cuda"
                  or "pair_id" in c.metadata]
    report.pairs = pairing.paired
    _add(chunks, report, url, as_json, pairing=pairing)


@app.command("add-pairs")
def add_pairs(cuda_dir: Path, metal_dir: Path,
              source: str = typer.Option(None, help="name for `kb remove`"),
              keep_unpaired: bool = KEEP, url: str = URL, as_json: bool = JSON):
    """Add the kernels of a CUDA folder and a Metal folder, pairing them by op name and
    content."""
    for p in (cuda_dir, metal_dir):
        if not p.is_dir():
            raise KportError(f"{p}: not a folder")
    source = source or f"{cuda_dir.resolve()}+{metal_dir.resolve()}"
    cuda, report = ingest(cuda_dir, source)
    metal, report2 = ingest(metal_dir, source)
    report.merge(report2)
    cuda, _, other = _by_language(cuda)
    _, metal, other2 = _by_language(metal)
    if not cuda:
        raise KportError(f"{cuda_dir}: no CUDA kernel (__global__ function in a .cu or .cuh "
                         "file) to pair")
    if not metal:
        raise KportError(f"{metal_dir}: no Metal kernel (kernel function in a .metal file, or "
                         "a metal_kernel source in a .py file) to pair")
    paired, pairing = pair_kernels(cuda, metal)
    _add_paired(paired + other + other2, pairing, report, keep_unpaired, url, as_json)


@app.command("import-llama-cpp")
def import_llama(path: Path = typer.Argument(..., help="llama.cpp checkout, or the "
                                             "llama-cpp-python sdist (.tar.gz) or its folder"),
                 keep_unpaired: bool = KEEP, url: str = URL, as_json: bool = JSON):
    """Import llama.cpp's ggml-cuda and ggml-metal kernels, paired by op name and content."""
    chunks, report, pairing = import_llama_cpp(path)
    _add_paired(chunks, pairing, report, keep_unpaired, url, as_json)


@app.command()
def remove(source: str, url: str = URL, as_json: bool = JSON):
    """Delete every chunk added from SOURCE (as `kb stats` lists them)."""
    counts = _store(url).remove(source)
    if as_json:
        print(json.dumps({"removed": counts}))
    else:
        _err().print(f"removed {sum(counts.values())} chunks"
                     + (f" ({', '.join(f'{k}: {v}' for k, v in counts.items())})"
                        if counts else f": no chunk has source {source!r}"))


@app.command()
def stats(url: str = URL, as_json: bool = JSON):
    """Chunks per collection and per source."""
    s = _store(url).stats()
    if as_json:
        print(json.dumps(s, indent=1))
        return
    print(f"{s['location']}  (embeddings: {s['embed_model']})")
    for name, n in s["collections"].items():
        print(f"  {name:<10} {n:>7}")
    print("sources:")
    for src, n in sorted(s["sources"].items()):
        print(f"  {n:>7}  {src}")


def _check_export_dest(dest: Path, force: bool) -> None:
    """KportError unless ``dest`` may be written: new, or an earlier export (or ``force``)."""
    if dest.is_dir():
        raise KportError(f"{dest}: a folder; name the export file, e.g. {dest / 'kb.jsonl'}")
    if not dest.parent.is_dir():
        raise KportError(f"{dest}: its folder {dest.parent} does not exist")
    if dest.exists() and not force:
        try:
            with open(dest, "rb") as fh:
                ours = b'"kport_kb_export"' in fh.readline(4096)
        except OSError:
            ours = False
        if not ours:
            raise KportError(f"{dest}: exists and is not a `kport kb export` file; name another "
                             "file, or pass --force to replace it")


@app.command("export")
def export_(dest: Path, url: str = URL,
            force: bool = typer.Option(False, "--force", help="replace DEST even when it is "
                                       "not an earlier export")):
    """Write the whole KB (texts, metadata, embeddings) to one JSON-lines file."""
    _check_export_dest(dest, force)
    try:
        n = _store(url).export(dest)
    except OSError as err:
        raise KportError(f"{dest}: cannot write the export ({err})") from None
    _err().print(f"exported {n} chunks to {dest}")


@app.command("import")
def import_(src: Path, url: str = URL, as_json: bool = JSON):
    """Load a file written by `kport kb export` (no duplicates; all or nothing)."""
    parsed = read_export(src)  # read and checked whole before the store is opened
    counts = _store(url, create=True).import_records(src, *parsed)
    if as_json:
        print(json.dumps(counts))
    else:
        _err().print(f"{counts['added']} chunks added, {counts['present']} already present")


@app.command()
def search(query: str = typer.Argument(..., help="a question, code, or @FILE to read the query "
                                       "from (a CUDA file: each hit says which lines)"),
           kind: list[str] = typer.Option(None, "--kind", help="rules, arch, analogues, docs, "
                                          "fixes (repeatable; default all)"),
           k: int = typer.Option(None, "-k", min=1, help="how many hits (default 5, with "
                                 "--json 10)"),
           category: str = typer.Option(None, help="only analogues of this op category"),
           feature: list[str] = typer.Option(None, "--feature", help="only chunks with this "
                                             "feature (repeatable)"),
           language: str = typer.Option(None, help="cuda | metal | markdown | rst | ..."),
           method: str = typer.Option("hybrid", help="hybrid | dense | bm25"),
           url: str = URL, as_json: bool = JSON):
    """Search the KB (built on first use): for each hit its rank, a calibrated score and what it
    says — a rule's text, CUDA and Metal spellings, an example pair and its source; --json
    prints a list of {id, kind, title, score, text, metadata, pair, ranks, rank, confidence,
    answer, lines}."""
    file = None
    if query.startswith("@"):
        file = Path(query[1:])
        try:
            query = file.read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise KportError(f"{file}: cannot read the query file ({err})") from None
    if file and not query.strip():
        raise KportError(f"{file}: the query file is empty")
    require_query(query)  # before the KB is opened (or built on first use), as below
    bad = ([f"--kind: unknown collection {x!r}; one of {', '.join(COLLECTIONS)}"
            for x in kind or [] if x not in COLLECTIONS]
           + [f"--feature: unknown feature {x!r}; one of {', '.join(FEATURES)}"
              for x in feature or [] if x not in FEATURES]
           + ([f"--method: unknown method {method!r}; one of {', '.join(METHODS)}"]
              if method not in METHODS else []))
    if bad:  # before the KB is opened (or built on first use)
        raise KportError(bad[0])
    settings = _settings(url)
    store, _ = ready_store(settings, _err())
    hits = search_store(store, query, kinds=kind or None, k=k or (10 if as_json else 5),
                        category=category,
                        features=feature or [], language=language, method=method,
                        cache_root=settings.home / "cache")
    rows = answers(hits, query, lines=file is not None)
    if as_json:
        print(json.dumps(rows, indent=1))
    elif not rows:
        print("nothing found")
    else:
        print(render(rows, file.name if file else None), end="")


@app.command()
def rules(file: Path, kernel: str = typer.Option(None, help="only this kernel and the "
                                                  "functions it calls"),
          include: list[Path] = include_option(), define: list[str] = define_option(),
          as_json: bool = JSON):
    """The concept rules that apply to a CUDA file, with occurrences and lines; the file is
    read as nvcc reads it (-I/-D, #if), a kernel with what it calls in any header."""
    hits = rules_for_file(file, kernel, include, define)
    if as_json:
        print(json.dumps([h.as_json() for h in hits], indent=1))
        return
    if not hits:  # said, not an empty output that reads like a failure to run
        _err().print(f"no concept rule applies to {escape(str(file))}"
                     + (f" (kernel {kernel})" if kernel else "")
                     + ": it uses no CUDA construct that kport's rules cover")
    for h in hits:
        print(f"{h.rule_id:<36} x{h.occurrences:<3} at {', '.join(h.where)}")
        print(f"    {' | '.join(h.cuda)}  ->  {h.metal}")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise KportError(f"{path}: cannot read ({err})") from None


@app.command()
def lint(body: Path = typer.Argument(..., help="an MLX metal_kernel body (.metal)"),
         header: Path = typer.Option(None, help="its header"),
         threadgroup: str = typer.Option(None, help="x,y,z of the launch's threadgroup"),
         template: list[str] = typer.Option(None, help="NAME=VALUE template argument "
                                            "(repeatable)"),
         chip: str = typer.Option("M1", help="the Apple chip to lint for, e.g. 'M2 Max'"),
         as_json: bool = JSON):
    """Performance and portability lints of a Metal kernel for one Apple GPU family; exit 1
    when any is an error."""
    dims = None
    if threadgroup:
        try:
            dims = tuple(int(v) for v in threadgroup.split(","))
        except ValueError:
            raise KportError(f"--threadgroup {threadgroup!r}: expected x,y,z integers") from None
        dims = (dims + (1, 1, 1))[:3]
    params: dict[str, object] = {}
    for item in template or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise KportError(f"--template {item!r}: expected NAME=VALUE")
        params[name] = int(value) if value.lstrip("-").isdigit() else value
    lints = lint_metal(_read(body), _read(header) if header else "", threadgroup=dims,
                       template=params, chip=chip)
    if as_json:
        print(json.dumps([x.model_dump() for x in lints], indent=1))
    else:
        for x in lints:
            print(f"{x.severity:<7} {x.id:<28} {x}  [{', '.join(x.sources)}]")
        print(f"{len(lints)} lints for {chip}")
    raise typer.Exit(1 if any(x.severity == "error" for x in lints) else 0)


@app.command()
def fixes(message: str = typer.Argument(..., help="a compile or runtime error message"),
          url: str = URL, as_json: bool = JSON):
    """The fix rules for an error message: those whose pattern recognises it (most specific
    first), then those retrieval over the KB's fix rules finds (when a KB exists)."""
    retrieved, note = [], ""
    settings = _settings(url)
    if settings.chroma_url or (settings.kb_dir / "chroma.sqlite3").is_file():
        try:
            retrieved = retrieve_fixes(KBStore.from_settings(settings), [message],
                                       settings.home / "cache")
        except KBError as err:
            note = f"no retrieval: {err}"
    found = merged_fixes([message], retrieved)
    if as_json:
        print(json.dumps(found, indent=1))
        return
    if note:
        _err().print(escape(note))
    if not found:
        print("no fix rule recognises this message")
    for f in found:
        how = "pattern" if f["via"] == "pattern" else f"retrieval, score {f['score']:.2f}"
        print(f"{f['id']}: {f['title']}  ({how})\n    {f['fix']}")


def main(argv: list[str]) -> int:
    """Entry of `kport kb`."""
    return app(args=argv, prog_name="kport kb", standalone_mode=True) or 0
