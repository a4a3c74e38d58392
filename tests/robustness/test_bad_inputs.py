"""Every bad input of tests/robustness/bad_inputs.toml, run through the real `kport` CLI in a
fresh scratch folder: the exit code is the documented one, the message is one line naming the
file, key or option (no traceback, no "internal error"), and nothing outside the scratch folder
changed (the corpus, /dev/shm, the temp folder)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.cli import KPORT
from tests.tiers import sampled

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "corpus" / "cases" / "001_saxpy"
BAD = tomllib.loads((Path(__file__).with_name("bad_inputs.toml")).read_text())["bad"]


def tree_digest(root: Path) -> dict[str, str]:
    """Path -> sha256 of every file under ``root`` (links by their target)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(root))] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def shm_entries() -> set[str]:
    shm = Path("/dev/shm")
    return {p.name for p in shm.iterdir() if p.name.startswith("kport")} if shm.is_dir() else set()


def setup_scratch(entry: dict, work: Path) -> dict[str, str]:
    """The scratch folder of one bad input; returns the placeholders of its argv."""
    case = work / "saxpy"
    shutil.copytree(SAXPY, case)
    toml = case / "case.toml"
    text = toml.read_text().replace('id = "001_saxpy"', 'id = "saxpy"')
    for old, new in entry.get("replace", []):
        assert old in text, f"{entry['id']}: {old!r} is not in case.toml (fix the corpus entry)"
        text = text.replace(old, new)
    toml.write_text(text)
    for name, content in entry.get("files", {}).items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith("@bytes:"):
            path.write_bytes(bytes((i * 167 + 91) % 256 for i in range(int(content[7:]))))
        else:
            path.write_text(content)
    return {"{case}": str(case), "{work}": str(work)}


def run_kport(argv: list[str], work: Path, env_extra: dict
              ) -> tuple[subprocess.CompletedProcess, int]:
    """The finished command and its pid (kport names the scratch folders it makes after it)."""
    tmp = work.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "KPORT_HOME": str(work.parent / "home"), "TMPDIR": str(tmp),
           **env_extra}
    with subprocess.Popen([*KPORT, *argv], cwd=work, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def test_the_corpus_is_big_and_distinct():
    ids = [b["id"] for b in BAD]
    assert len(ids) >= 60 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("entry", sampled(BAD, [b["id"] for b in BAD], every=3))
def test_bad_input(entry, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    subs = setup_scratch(entry, work)
    argv = [subs.get(a, a) for a in entry["argv"]]
    argv = [a.replace("{case}", subs["{case}"]).replace("{work}", subs["{work}"]) for a in argv]
    before, corpus_before, shm_before = tree_digest(work), tree_digest(SAXPY), shm_entries()
    proc, pid = run_kport(argv, work, entry.get("env", {}))
    out = proc.stdout + proc.stderr
    assert proc.returncode == entry.get("code", 2), out
    assert "Traceback" not in out and "internal error" not in out, out
    message = proc.stderr.strip()
    assert message and len(message.splitlines()) == 1, f"not one line:\n{message}"
    for fragment in entry["expect"]:
        assert fragment.lower() in message.lower(), f"{fragment!r} not in: {message}"
    assert tree_digest(work) == before, "the command changed the user's files"
    assert tree_digest(SAXPY) == corpus_before
    assert not list((tmp_path / "tmp").iterdir()), "left files in the temp folder"
    # other kport processes (a parallel test run) may come and go in /dev/shm meanwhile
    left = {e for e in shm_entries() - shm_before if f"-p{pid}s" in e}
    assert not left, f"left entries in /dev/shm: {left}"
