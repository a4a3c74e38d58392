"""The knowledge base changes atomically (issue 21): a failed `kport kb import` leaves the store
it found (or none) byte for byte, never an empty one; an empty store an older kport left says
what to do instead of a traceback (`kb stats`), or is rebuilt on first use (`kport port`).
Real CLI in a child process, private KPORT_HOME."""

import hashlib
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds the whole knowledge base, kills imports (tests/tiers.py)

ROOT = Path(__file__).resolve().parents[2]


def tree(home: Path) -> dict[str, str]:
    """The store the link $KPORT_HOME/kb names: its target and every file's sha256."""
    kb = home / "kb"
    if not kb.exists():
        return {}
    root = kb.resolve()
    out = {"->": str(root)}
    out.update({str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".kport.lock"})
    return out


def clean(proc) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
        proc.stderr


@pytest.fixture(scope="module")
def export(built_home, tmp_path_factory, cli) -> Path:
    dump = tmp_path_factory.mktemp("export") / "kb.jsonl"
    assert cli("kb", "export", str(dump), home=built_home).returncode == 0
    return dump


@pytest.fixture
def home(export, tmp_path, cli) -> Path:
    """A KPORT_HOME of the test's own holding the built KB (imported: no embedding)."""
    home = tmp_path / "home"
    proc = cli("kb", "import", str(export), home=home)
    assert proc.returncode == 0, proc.stderr
    return home


def _top(cli, home: Path) -> str:
    proc = cli("kb", "search", "warp reduce", "-k", "1", "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)[0]["id"]


def test_importing_a_missing_file_into_no_kb_leaves_no_kb(tmp_path, cli):
    home = tmp_path / "home"
    clean(cli("kb", "import", "/nonexistent.jsonl", home=home))
    assert not (home / "kb").exists()
    proc = cli("kb", "stats", home=home)  # `kb search` would build one (test_kb_ready.py)
    clean(proc)
    assert "kport kb build" in proc.stderr


def test_failed_imports_leave_the_kb_as_it_was(home, export, tmp_path, cli):
    top, before = _top(cli, home), tree(home)
    lines = export.read_text().splitlines()
    not_json = tmp_path / "garbage.jsonl"
    not_json.write_text("this is not an export\n")
    cut = tmp_path / "cut.jsonl"  # what an interrupted copy leaves: a line cut short
    cut.write_text("\n".join(lines[:40]) + "\n" + lines[40][: len(lines[40]) // 2])
    one_bad = tmp_path / "one-bad.jsonl"  # the bad line comes after many good ones
    bad = json.loads(lines[5])
    bad["metadata"] = ["not", "an", "object"]
    one_bad.write_text("\n".join(lines[:-1] + [json.dumps(bad), lines[-1]]) + "\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text(lines[0] + "\n")
    for src, says in [("/nonexistent.jsonl", "cannot read"), (not_json, "not a kport KB export"),
                      (cut, f"{cut}:41"), (one_bad, f"{one_bad}:{len(lines)}"),
                      (empty, "no chunks")]:
        proc = cli("kb", "import", str(src), home=home)
        clean(proc)
        assert says in proc.stderr, proc.stderr
        assert tree(home) == before, src
    assert _top(cli, home) == top


def _older_empty_store(home: Path) -> None:
    """What `kport kb import /nonexistent.jsonl` used to leave: a store with no chunk."""
    import chromadb
    from chromadb.config import Settings

    chromadb.PersistentClient(path=str(home / "kb"), settings=Settings(anonymized_telemetry=False))
    assert (home / "kb" / "chroma.sqlite3").is_file()


def test_an_empty_store_of_an_older_kport_says_to_build(tmp_path, export, cli):
    home = tmp_path / "home"
    _older_empty_store(home)
    proc = cli("kb", "stats", home=home)
    clean(proc)
    assert "is empty" in proc.stderr and "kport kb build" in proc.stderr
    assert cli("kb", "import", str(export), home=home).returncode == 0  # replaces the old one
    assert (home / "kb").is_symlink() and _top(cli, home)
    assert not [p for p in home.iterdir() if p.name.startswith(".kb.v-older")]


def test_a_port_builds_over_an_empty_store_of_an_older_kport(tmp_path, cli):
    home = tmp_path / "home"
    _older_empty_store(home)
    proc = cli("port", str(ROOT / "corpus" / "cases" / "001_saxpy" / "kernel.cu"), "--kernel",
               "saxpy", "--out", str(tmp_path / "pkg"), "--offline", home=home)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "built the knowledge base on first use" in proc.stdout, proc.stdout
    assert (home / "kb").is_symlink() and _top(cli, home)


def test_export_never_replaces_a_users_file(home, tmp_path, cli):
    notes = tmp_path / "notes.jsonl"
    notes.write_text("my own notes\n")
    proc = cli("kb", "export", str(notes), home=home)
    clean(proc)
    assert "--force" in proc.stderr and notes.read_text() == "my own notes\n"
    clean(cli("kb", "export", str(tmp_path / "no" / "such" / "dir.jsonl"), home=home))
    dest = tmp_path / "out.jsonl"
    for _ in range(2):  # an earlier export is replaced, through a temporary file
        assert cli("kb", "export", str(dest), home=home).returncode == 0
    assert json.loads(dest.read_text().splitlines()[0])["kport_kb_export"] == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["notes.jsonl",
                                                                         "out.jsonl"]
