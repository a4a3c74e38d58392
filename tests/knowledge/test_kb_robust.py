"""Robustness of the store: a killed `kport kb add` leaves the previous store as it was and a
re-run that completes without duplicates; readers keep working while a writer adds."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.cli import KPORT

pytestmark = pytest.mark.slow  # kills and races kb writers (tests/tiers.py)

N_FILES, PER_FILE = 24, 10  # an add that embeds for seconds: long enough to be killed in
READ_WHILE_FILES = 16  # an add long enough for readers to run during it, short for CI


@pytest.fixture(autouse=True)
def cold_embed_cache(tmp_path, monkeypatch):
    """Each test embeds its texts itself (the run's shared cache would make the writes these
    tests race and kill too quick to catch), its kb commands included."""
    monkeypatch.setenv("KPORT_EMBED_CACHE", str(tmp_path / "embed"))


def _generated_tree(root: Path, n_files: int = N_FILES) -> Path:
    ops = ["+", "-", "*"]
    for f in range(n_files):
        body = []
        for k in range(PER_FILE):
            body.append(f"__global__ void op_{f}_{k}(const float* x, float* y, int n) {{\n"
                        f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                        f"  if (i < n) y[i] = x[i] {ops[k % 3]} {f * PER_FILE + k}.0f;\n}}\n")
        (root / f"gen_{f:02d}.cu").write_text("\n".join(body))
    return root


def _count(home: Path) -> int:
    from kb.store import KBStore

    return KBStore(home / "kb").stats()["collections"]["analogues"]


def _add(home: Path, src: Path) -> subprocess.Popen:
    env = {**os.environ, "KPORT_HOME": str(home)}
    return subprocess.Popen([*KPORT, "kb", "add", str(src),
                             "--source", "gen", "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_kill_mid_add_leaves_the_previous_store_and_a_rerun_completes(tmp_path, cli):
    home = tmp_path / "home"
    seed = tmp_path / "seed.cu"
    seed.write_text("__global__ void seed_add(float* y) { y[threadIdx.x] += 1.0f; }\n")
    assert cli("kb", "add", str(seed), home=home).returncode == 0
    before = (home / "kb").resolve()
    (tmp_path / "src").mkdir()
    src = _generated_tree(tmp_path / "src")
    total = N_FILES * PER_FILE
    proc = _add(home, src)
    deadline = time.time() + 240
    stages: list[Path] = []
    while time.time() < deadline and proc.poll() is None and not stages:
        stages = [p for p in home.glob(".kb.v-*") if p != before
                  and (p / "chroma.sqlite3").is_file()]
        time.sleep(0.05)
    time.sleep(0.5)  # into the embedding of the new chunks
    assert proc.poll() is None, f"the add finished before it could be killed: {proc.stderr}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (home / "kb").resolve() == before and _count(home) == 1  # the previous store, whole
    proc = _add(home, src)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    counts = json.loads(out)
    assert counts["added"] == total and counts["present"] == 0
    assert _count(home) == total + 1
    from kb.store import KBStore

    ids = KBStore(home / "kb").documents("analogues")["ids"]
    assert len(ids) == len(set(ids)) == total + 1
    assert not any(p.exists() for p in stages)  # the killed write's folder is cleaned up


READER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from kb.search import search
    from kb.store import KBStore
    home, stop = Path(sys.argv[1]), Path(sys.argv[2])
    store = KBStore(home / "kb")
    ok = 0
    deadline = time.time() + 240
    while not stop.exists() and time.time() < deadline:
        hits = search(store, "elementwise add kernel", k=5, cache_root=home / "cache")
        assert hits and all(h.text for h in hits)
        ok += 1
        time.sleep(0.05)  # many searches during the add, without starving the writer of CPU
    print(json.dumps({"searches": ok}))
""")


def test_readers_keep_working_while_a_writer_adds(tmp_path, cli):
    home = tmp_path / "home"
    seed = tmp_path / "seed.cu"
    seed.write_text("__global__ void seed_add(float* y) { y[threadIdx.x] += 1.0f; }\n")
    assert cli("kb", "add", str(seed), home=home).returncode == 0
    (tmp_path / "src").mkdir()
    src = _generated_tree(tmp_path / "src", READ_WHILE_FILES)
    stop = tmp_path / "stop"
    env = {**os.environ, "KPORT_HOME": str(home)}
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(home), str(stop)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    writer = _add(home, src)
    mid = cli("kb", "search", "add kernel", "--json", home=home)  # a fresh process, mid-write
    out, err = writer.communicate(timeout=600)
    stop.touch()
    assert writer.returncode == 0, err
    assert mid.returncode == 0, mid.stderr
    assert json.loads(mid.stdout)
    for r in readers:
        out, err = r.communicate(timeout=300)
        assert r.returncode == 0, err
        assert json.loads(out)["searches"] > 0
    assert _count(home) == READ_WHILE_FILES * PER_FILE + 1
