"""The knowledge base is ready on first use (issue 18): the first command that needs it builds
it once — two started together build it once, under the writer lock — and says where it lives;
a build that cannot happen (no embedding model, a full disk) is one line, leaves nothing behind,
and a port goes on without retrieval, saying so. Real CLI in child processes, private homes,
the run's shared embedding cache (tests/conftest.py)."""

import json
import resource
import signal
import subprocess
from pathlib import Path

import pytest

from tests.cli import KPORT, kport_env

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "corpus" / "cases" / "001_saxpy"


def _env(home: Path, **extra) -> dict:
    return kport_env({"KPORT_HOME": str(home), **extra})


def _versions(home: Path) -> list[str]:
    return sorted(p.name for p in home.glob(".kb.v-*"))


@pytest.mark.slow  # builds the whole knowledge base (tests/tiers.py)
def test_two_first_searches_build_the_kb_once(tmp_path):
    from kb.ready import default_chunks
    from kb.store import KBStore

    home = tmp_path / "home"
    procs = [subprocess.Popen([*KPORT, "kb", "search", "warp shuffle reduction", "-k", "2",
                               "--json"], cwd=ROOT, env=_env(home), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert len(json.loads(out)) == 2
    built = [err for _, err in outs if "built the knowledge base on first use" in err]
    assert len(built) == 1, [err for _, err in outs]  # the other waited, or came after
    assert f"{home / 'kb'}" in built[0] and "chunks in" in built[0]
    assert len(_versions(home)) == 1 and (home / "kb").is_symlink()
    stats = KBStore(home / "kb").stats()["collections"]
    assert sum(stats.values()) == len({c.id for c in default_chunks()})
    before = _versions(home)
    again = subprocess.run([*KPORT, "kb", "search", "warp", "-k", "1"], cwd=ROOT,
                           env=_env(home), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "built the knowledge base" not in again.stderr
    assert _versions(home) == before  # nothing rebuilt


@pytest.mark.slow  # builds the whole knowledge base (tests/tiers.py)
def test_a_kb_that_cannot_be_built_is_one_line_and_the_port_goes_on(tmp_path):
    home = tmp_path / "home"
    env = _env(home, KPORT_EMBED_MODEL="no-such-embedding-model")
    proc = subprocess.run([*KPORT, "kb", "search", "warp reduce"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "cannot build the knowledge base at" in proc.stderr
    assert "no-such-embedding-model" in proc.stderr and "nothing was written" in proc.stderr
    assert not (home / "kb").exists() and _versions(home) == []
    port = subprocess.run([*KPORT, "port", str(SAXPY / "kernel.cu"), "--case", str(SAXPY),
                           "--out", str(tmp_path / "pkg"), "--offline"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert port.returncode == 0 and "Traceback" not in port.stderr, port.stderr
    assert "no retrieval: cannot build the knowledge base" in port.stdout
    assert "porting goes on without the knowledge base" in port.stdout
    rep = json.loads((tmp_path / "pkg" / "report.json").read_text())
    assert rep["accepted"] and rep["kb"].startswith("no retrieval") and rep["analogues"] == []
    assert rep["rules_by_line"]  # exact rule matching needs no KB


def _small_disk():
    """In the child: files may not grow past 1 MB (a full disk, as a write sees it)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))


@pytest.mark.slow  # builds the whole knowledge base (tests/tiers.py)
@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE")
def test_a_full_disk_during_the_first_build_is_one_line_and_leaves_nothing(tmp_path):
    home = tmp_path / "home"
    proc = subprocess.run([*KPORT, "kb", "search", "warp reduce"], cwd=ROOT, env=_env(home),
                          capture_output=True, text=True, timeout=300, preexec_fn=_small_disk)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "cannot build the knowledge base at" in proc.stderr and "free" in proc.stderr
    assert not (home / "kb").exists() and _versions(home) == []
    ok = subprocess.run([*KPORT, "kb", "search", "warp reduce", "-k", "1"], cwd=ROOT,
                        env=_env(home), capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "built the knowledge base on first use" in ok.stderr


def test_bad_options_are_refused_before_anything_is_built(tmp_path):
    home = tmp_path / "home"
    for args, says in ((["--kind", "bogus"], "unknown collection 'bogus'"),
                       (["--feature", "nope"], "unknown feature 'nope'"),
                       (["--method", "magic"], "unknown method 'magic'")):
        proc = subprocess.run([*KPORT, "kb", "search", "x", *args], cwd=ROOT, env=_env(home),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert not (home / "kb").exists()


@pytest.mark.slow  # builds the whole knowledge base (tests/tiers.py)
def test_an_existing_kb_is_used_as_it_is(built_home):
    from kb.ready import ready_store
    from runners.settings import load_settings

    store, note = ready_store(load_settings(env={"KPORT_HOME": str(built_home)}))
    assert note == "" and store.has_chunks()


@pytest.mark.slow  # builds the whole knowledge base (tests/tiers.py)
def test_rules_an_upgrade_changed_are_replaced_not_answered_beside(tmp_path):
    """A KB built by an older kport (one rule, one fact worded otherwise) is brought up to the
    installed rules on first use: the old chunks removed, the current ones added, one note;
    a user's own chunks stay, and a store of only those gets none; a disk that cannot take
    the write leaves the store searchable as it was. `kport kb build` replaces them the same way."""
    from kb.chunks import RULES, Chunk
    from kb.ready import default_chunks
    from kb.store import KBStore

    def older(c: Chunk) -> Chunk:
        return Chunk(c.collection, c.title, c.text + "\nas an older kport worded it", c.metadata)

    home = tmp_path / "home"
    chunks = default_chunks()
    rule = next(c for c in chunks if c.metadata.get("rule_id") == "warp.shfl_down")
    fact = next(c for c in chunks if c.metadata.get("arch_id") == "F3")
    mine = Chunk("docs", "my notes", "how we port warp shuffles", {"source": "mine"})
    KBStore(home / "kb", create=True).add(
        [c for c in chunks if c not in (rule, fact)] + [older(rule), older(fact), mine])
    query = [*KPORT, "kb", "search", "warp shuffle down", "-k", "3", "--json"]
    if hasattr(resource, "RLIMIT_FSIZE"):  # a disk that cannot take the refresh: old rules
        full = subprocess.run(query, cwd=ROOT, env=_env(home), capture_output=True, text=True,
                              timeout=600, preexec_fn=_small_disk)
        assert full.returncode == 0 and len(json.loads(full.stdout)) == 3, full.stderr
        assert "could not be refreshed" in full.stderr and "Traceback" not in full.stderr
    proc = subprocess.run(query, cwd=ROOT, env=_env(home), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "refreshed kport's rules" in proc.stderr and "2 chunks added, 2 removed" in proc.stderr
    ids = {i for n in ("rules", "arch", "docs") for i in KBStore(home / "kb").documents(n)["ids"]}
    assert {rule.id, fact.id, mine.id} <= ids
    assert not ids & {older(rule).id, older(fact).id}
    again = subprocess.run([*KPORT, "kb", "search", "warp", "-k", "1"], cwd=ROOT,
                           env=_env(home), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "refreshed" not in again.stderr, again.stderr

    KBStore(home / "kb").add([older(rule)])
    build = subprocess.run([*KPORT, "kb", "build"], cwd=ROOT, env=_env(home),
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0 and "1 outdated removed" in build.stderr, build.stderr
    assert older(rule).id not in KBStore(home / "kb").documents("rules")["ids"]
    assert KBStore(home / "kb").stale({c.id for c in chunks}, {RULES}) == {}

    own = tmp_path / "own"  # a store of the user's own chunks only: never given kport's rules
    KBStore(own / "kb", create=True).add([mine])
    proc = subprocess.run([*KPORT, "kb", "search", "warp shuffles", "-k", "3"], cwd=ROOT,
                          env=_env(own), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "refreshed" not in proc.stderr, proc.stderr
    assert sum(KBStore(own / "kb").stats()["collections"].values()) == 1
