"""Folders kport writes for the user (`kport port --out`, chat's /save, `kport report --out`,
`kport eval --out`): nothing the user has is lost.

A folder kport wrote carries MARKER (JSON: kport's version, the command, each file's sha256).
kport writes into a folder only when it is absent, empty, or a kport folder whose files are all
as kport left them; anything else (a file of the user's, or one of kport's that was edited)
makes it refuse, before any work starts, unless --force. A package replaces a kport folder
whole: it is written into a hidden folder beside the target, then the old folder is renamed
aside, the new one renamed into place and the old one removed, so a kill leaves the old package
or the new one, never a mix. With --force into a folder holding other files, those are left
alone and each package file replaces its namesake atomically (the package as a whole is not).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

from runners.errors import KportError

MARKER = ".kport-package"
SCRATCH = {"__pycache__", ".pytest_cache"}  # what running the package's own test_kernel.py adds
_NEW, _OLD = ".kport-new-", ".kport-old-"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _version() -> str:
    try:
        return metadata.version("kport")
    except metadata.PackageNotFoundError:
        return "unknown"


def read_marker(folder: Path) -> dict | None:
    """The marker of a folder kport wrote ({"kport", "written_by", "written", "files"}), or
    None when there is none or it is not kport's."""
    try:
        data = json.loads((Path(folder) / MARKER).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("files"), dict)
    return data if ok else None


def folder_files(folder: Path) -> list[str]:
    """Relative paths of everything under ``folder`` but folders, scratch and live stages."""
    out = []
    for item in sorted(Path(folder).rglob("*")):
        rel = item.relative_to(folder)
        if rel.parts[0] in SCRATCH | {MARKER} or rel.parts[0].startswith(_NEW) \
                or SCRATCH & set(rel.parts):
            continue
        if item.is_symlink() or not item.is_dir():
            out.append(str(rel))
    return out


def foreign_files(folder: Path, keep: Iterable[str] = ()) -> list[str]:
    """Paths in ``folder`` that kport did not write there, or that changed since it did
    (sorted); ``keep`` paths and the test scratch folders do not count."""
    listed = (read_marker(folder) or {}).get("files", {})
    keep = set(keep)
    out = []
    for rel in folder_files(folder):
        item = Path(folder) / rel
        if rel in keep:
            continue
        mine = rel in listed and item.is_file() and not item.is_symlink()
        if not mine or listed[rel] != _sha256(item):
            out.append(rel)
    return out


def _pid_alive(name: str) -> bool:
    """Whether the kport process whose id a leftover's name carries still runs."""
    try:
        pid = int(name.rsplit("-", 2)[-2])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _leftovers(folder: Path) -> list[Path]:
    """Hidden stage / old folders of earlier writes into ``folder`` whose process is gone."""
    prefix = f".{folder.name}"
    try:
        items = list(folder.parent.iterdir())
    except OSError:
        return []
    return [p for p in items if p.name.startswith((prefix + _NEW, prefix + _OLD))
            and not _pid_alive(p.name)]


def _recover(folder: Path) -> None:
    """A kill between the two renames of a swap leaves no ``folder`` but its old contents
    beside it: put them back. Other leftovers of dead writes are removed."""
    for item in sorted(_leftovers(folder)):
        if _OLD in item.name and not folder.exists():
            with contextlib.suppress(OSError):
                item.rename(folder)
                continue
        shutil.rmtree(item, ignore_errors=True)


def check_out_folder(folder: Path, *, force: bool, flag: str = "--out",
                     keep: Iterable[str] = ()) -> None:
    """Raise KportError (one line: the folder and the fix) unless kport may write into
    ``folder``: absent (its parent creatable and writable), empty, a kport folder unchanged
    since kport wrote it, or anything with ``force``. Touches nothing but dead leftovers."""
    folder = Path(folder).absolute()
    if folder.exists() and not folder.is_dir():
        raise KportError(f"{flag} {folder}: a file, not a folder; name a folder (it is created "
                         "if missing)")
    if folder.is_dir():
        _recover(folder)
        for item in folder.glob(_NEW + "*"):  # a dead --force write's stage inside the folder
            if not _pid_alive(item.name):
                shutil.rmtree(item, ignore_errors=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise KportError(f"{flag} {folder}: cannot write into this folder; pick another")
        foreign = foreign_files(folder, keep)
        if foreign and not force:
            more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            raise KportError(f"{flag} {folder}: holds files kport did not write "
                             f"({', '.join(foreign[:3])}{more}); pick another folder, or pass "
                             "--force to write into it (files of the same names are replaced, "
                             "the others left alone)")
        return
    _recover(folder)
    if folder.exists():
        return
    up = folder.parent
    while not up.exists():
        up = up.parent
    if not up.is_dir():
        raise KportError(f"{flag} {folder}: cannot be created: {up} is a file")
    if not os.access(up, os.W_OK | os.X_OK):
        raise KportError(f"{flag} {folder}: cannot be created: {up} is not writable; pick "
                         "another folder")


def _write_marker(stage: Path, command: str, names: list[str]) -> None:
    marker = {"kport": _version(), "written_by": command,
              "written": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "files": {n: _sha256(stage / n) for n in names}}
    (stage / MARKER).write_text(json.dumps(marker, indent=1) + "\n")


def _stage(where: Path, name: str) -> Path:
    stage = where / f"{'.' + name if name else ''}{_NEW}{os.getpid()}-{secrets.token_hex(3)}"
    stage.mkdir(parents=True)
    return stage


def write_folder(folder: Path, fill: Callable[[Path], object], *, command: str,
                 force: bool = False, keep: Iterable[str] = ()) -> list[str]:
    """Fill a fresh folder with ``fill(stage)`` and put it in place as ``folder`` (checked
    again by check_out_folder first; ``keep``: the user's files that fill carries over, listed
    as theirs, not kport's); returns the names written. A clean kport folder or an
    absent one is replaced whole; with ``force`` a folder holding other files gets each file
    replaced atomically, and the files kport wrote there before are removed unless changed."""
    keep = tuple(keep)
    check_out_folder(folder, force=force, keep=keep)
    folder = Path(folder).absolute()
    whole = not folder.exists() or not (folder.is_symlink() or foreign_files(folder, keep)
                                        or folder.resolve() == Path.cwd().resolve())
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage = _stage(folder.parent if whole else folder, folder.name if whole else "")
    try:
        fill(stage)
        names = folder_files(stage)
        # files carried over (``keep``: the user's case) stay the user's, not kport's
        _write_marker(stage, command, [n for n in names if n not in set(keep)])
        if whole:
            _swap(stage, folder)
        else:
            _merge(stage, folder, names)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return names


def _swap(stage: Path, folder: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    stage.chmod(0o777 & ~umask)  # mkdir under a private name; the package is the user's
    if not folder.exists():
        os.rename(stage, folder)
        return
    old = folder.parent / f".{folder.name}{_OLD}{os.getpid()}-{secrets.token_hex(3)}"
    os.rename(folder, old)
    os.rename(stage, folder)
    shutil.rmtree(old, ignore_errors=True)


def _merge(stage: Path, folder: Path, names: list[str]) -> None:
    before = read_marker(folder) or {"files": {}}
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage / name, folder / name)
    for name, digest in before["files"].items():  # kport's own files of the earlier package
        path = folder / name
        if name not in names and path.is_file() and not path.is_symlink() \
                and _sha256(path) == digest:
            path.unlink()
    os.replace(stage / MARKER, folder / MARKER)


def write_files_atomically(folder: Path, files: dict[str, str]) -> list[Path]:
    """Write each name -> text into ``folder`` through a temporary file and a rename (a kill
    leaves the old file or the new one); returns the paths."""
    out = []
    for name, text in files.items():
        path = folder / name
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text)
        os.replace(tmp, path)
        out.append(path)
    return out
