"""The knowledge base, ready on first use: a command that needs it (``kport kb search``,
``kport port``, chat, MCP) builds the default KB when the local store is missing or empty,
instead of asking for ``kport kb build`` first.

The build is the one ``kport kb build`` does (concept, architecture and fix rules plus the
corpus's pairs), all or nothing like every write (kb/store.py). It runs under the store's writer
lock and checks again once it holds it, so two commands started together build once: the second
waits and then reads what the first built. A terminal shows a progress bar; one line on stderr
says where the KB now lives. A build that fails (no embedding model, a full disk) is a KBError
of one line, and nothing is left half-built. A built store whose kport rules, facts or fixes
differ from the installed ones (an upgrade) has them replaced first, with a one-line note. A
Chroma server (KPORT_CHROMA_URL) is never built
implicitly: it is shared, and whoever runs it builds it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kb.chunks import RULES, Chunk, arch_chunks, fix_chunks, rule_chunks
from kb.store import KBError, KBStore
from runners.errors import KportError


def default_chunks(corpus: Path | None = None) -> list[Chunk]:
    """What ``kport kb build`` stores: concept, architecture and fix rules and the corpus's
    CUDA/Metal pairs (the bundled corpus unless ``corpus`` names another)."""
    from kb.ingest import corpus_chunks  # lazy: it loads every case of the corpus

    return rule_chunks() + arch_chunks() + fix_chunks() + corpus_chunks(corpus)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:600]


def _free(path: Path) -> str:
    """The free space of the disk holding ``path``'s folder, for a failed build's message."""
    try:
        return f"{shutil.disk_usage(path.parent).free / 1e6:,.0f} MB"
    except OSError:
        return "unknown space"


def _missing_or_empty(path: Path, embed_model: str | None) -> bool:
    """Whether the local store at ``path`` is absent or holds no chunk (what an older kport's
    failed command left). A store that cannot be read is neither: its KBError propagates, so
    kport never builds over something it does not understand."""
    if not (path / "chroma.sqlite3").is_file():
        return True
    return not KBStore(path, embed_model=embed_model, create=True).has_chunks()


def ready_store(settings, console: Console | None = None) -> tuple[KBStore, str]:
    """(the KB store ``settings`` name, a note) — the default KB built first when the local
    store is missing or empty; the note says so ('' when the KB was already there).
    KBError (one line) when it cannot be opened or built."""
    if settings.chroma_url:
        return KBStore.from_settings(settings), ""
    path = settings.kb_dir
    if (path / "chroma.sqlite3").is_file():
        try:
            store = KBStore.from_settings(settings)
        except KBError:
            if not _missing_or_empty(path, settings.embed_model):
                raise  # corrupt or another model: the message says what to do
        else:
            if store.has_chunks():
                return store, refresh_rules(store, path, console)
    console = console or Console(stderr=True, highlight=False)
    store = KBStore(path, embed_model=settings.embed_model, create=True)
    waited = []

    def on_wait() -> None:
        waited.append(True)
        console.print(f"kport: another kport is building the knowledge base at {path}; "
                      "waiting for it", soft_wrap=True, markup=False)

    with store.writer_lock(on_wait):
        if not _missing_or_empty(path, settings.embed_model):  # built while we waited
            note = f"knowledge base at {path} (built by another kport just now)"
            return KBStore.from_settings(settings), note if waited else ""
        note = _build(store, path, console)
    console.print(f"kport: {note}", soft_wrap=True, markup=False)
    return store, note


def refresh_rules(store: KBStore, path: Path, console: Console | None = None) -> str:
    """Bring kport's own rules, facts and fixes in a built store up to the installed ones
    (a kport upgrade changed them): their old chunks replaced, not answering beside the new.
    A store holding none of them (made with `kport kb add` alone) is left as it is.
    '' when they are current; else the one-line note, also printed. A store that cannot be
    written (all or nothing: it is left as it was) is searched as it is, and the note says so."""
    chunks = rule_chunks() + arch_chunks() + fix_chunks()

    def current() -> bool:  # a store holding none of kport's rules is the user's own: as is
        if store.stale({c.id for c in chunks}, {RULES}):
            return False
        return store.missing(chunks) in (0, len(chunks))

    if current():
        return ""
    with store.writer_lock():
        if current():  # another kport refreshed it while we waited
            return ""
        try:
            counts = store.sync(chunks, {RULES})
        except Exception as err:  # noqa: BLE001 - a read-only or full disk, chromadb's errors
            note = (f"kport's rules in the knowledge base at {path} are not the installed ones "
                    f"and could not be refreshed ({_one_line(err)}); searching it as it is "
                    "(`kport kb build` retries)")
        else:
            note = (f"refreshed kport's rules in the knowledge base at {path}: "
                    f"{counts['added']} chunks added, {counts['removed']} removed (the "
                    "installed kport's rules changed)")
    (console or Console(stderr=True, highlight=False)).print(f"kport: {note}", soft_wrap=True,
                                                             markup=False)
    return note


def _build(store: KBStore, path: Path, console: Console) -> str:
    """Build the default KB into ``store`` (writer lock held); the one-line note."""
    start = time.monotonic()
    try:
        chunks = default_chunks()
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=True,
                      disable=not console.is_terminal) as bar:
            task = bar.add_task("building the knowledge base (first use)", total=len(chunks))
            counts = store.add(chunks, progress=lambda n: bar.advance(task, n))
    except KBError as err:
        raise KBError(f"cannot build the knowledge base at {path}: {_one_line(err)}") from None
    except KportError as err:  # no embedding model, a bad rules file
        raise KBError(f"cannot build the knowledge base at {path}: {_one_line(err)}; "
                      "nothing was written (fix that, then run `kport kb build`)") from None
    except OSError as err:  # a full disk, a folder that cannot be written
        raise KBError(f"cannot build the knowledge base at {path}: "
                      f"{err.strerror or _one_line(err)}; nothing was written ({_free(path)} "
                      "free there: free space, or set KPORT_HOME to a writable folder, then run "
                      "`kport kb build`)") from None
    except Exception as err:  # noqa: BLE001 - chromadb/sqlite raise many types (disk full)
        raise KBError(f"cannot build the knowledge base at {path}: {type(err).__name__}: "
                      f"{_one_line(err)}; nothing was written ({_free(path)} free there: free "
                      "space, or set KPORT_HOME to a writable folder, then run "
                      "`kport kb build`)") from None
    return (f"built the knowledge base on first use at {path}: {counts['added']} chunks in "
            f"{time.monotonic() - start:.1f} s (`kport kb build` refreshes it)")
