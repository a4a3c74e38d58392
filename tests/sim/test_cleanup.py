"""Nothing is left behind when kport is stopped: a real `kport check` is sent SIGTERM, SIGINT
or SIGKILL in the middle of a launch and in the middle of a compile, and afterwards no process
of it runs, and no scratch folder (temp folder, /dev/shm) or partial build file of it remains;
after SIGKILL, which cannot be caught, the next kport command removes them."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import KPORT

pytestmark = [pytest.mark.slow,  # kills compiles and launches mid-way (tests/tiers.py)
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="/proc, /dev/shm and PR_SET_PDEATHSIG are Linux's")]

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "corpus" / "cases" / "001_saxpy"
# Spins for ever (volatile: the compiler may not drop the loop).
HANG = ("uint i = thread_position_in_grid.x;\nvolatile uint k = 0;\nwhile (k < 2u) { k = 1u; }\n"
        "y_out[i % uint(n)] = 0;\n")
# About 10^5 statements from macros: a compile of a minute, honest all the same.
SLOW_HEADER = ("#define A(x) x x x x x x x x x x\n#define B(x) A(A(x))\n"
               "#define S acc = acc * 1.0001f + float(i & 7);\n")
SLOW = ("uint i = thread_position_in_grid.x;\nfloat acc = 0.0f;\nA(B(B(S)))\n"
        "if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]) + 0.0f * acc;\n")
EXIT = {signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGINT: 130}


@pytest.fixture
def scratch(tmp_path):
    """A private KPORT_HOME (the simulator host copied in, so nothing rebuilds it) and
    TMPDIR; the environment of the kport commands."""
    from runners.simbuild import host_executable

    host = host_executable()
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    shutil.copytree(host.parent, home / "cache" / "build" / host.parent.name)
    tmp.mkdir()
    env = {**os.environ, "KPORT_HOME": str(home), "TMPDIR": str(tmp),
           "KPORT_SIM_TIMEOUT": "100", "KPORT_COMPILE_TIMEOUT": "100",
           "PYTHONPATH": str(ROOT)}
    env.pop("KPORT_BUILD_CACHE", None)  # the home's own cache, which these tests look into
    return tmp_path, env


def _default_sigint() -> None:
    """A shell without job control starts background jobs with SIGINT ignored, and Python then
    leaves it ignored: give the child Ctrl-C's usual meaning whatever started the tests."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _kport(args: list[str], env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen([*KPORT, *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=_default_sigint, **kw)


def _mentioning(text: str) -> dict[int, str]:
    """Live (not zombie) processes whose command line holds ``text``: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if entry.name.isdigit() and text in line and int(entry.name) != os.getpid() and \
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found[int(entry.name)] = line
        except OSError:
            continue
    return found


def _wait_for(what, seconds: float, why: str):
    end = time.monotonic() + seconds
    while not (found := what()):
        assert time.monotonic() < end, why
        time.sleep(0.05)
    return found


def _launch_folders(procs: dict[int, str]) -> list[Path]:
    """The /dev/shm folders named in the simulator hosts' command lines."""
    return sorted({Path("/dev/shm", Path(word).parts[3]) for line in procs.values()
                   for word in line.split() if word.startswith("/dev/shm/kport-launch-")})


def _leftovers(tmp_path: Path, shm: list[Path]) -> list[str]:
    tmp, cache = tmp_path / "tmp", tmp_path / "home" / "cache" / "build"
    left = [str(p) for p in tmp.iterdir() if p.name.startswith("kport-")]
    left += [str(p) for p in shm if p.exists()]
    left += [str(p) for p in cache.rglob(".tmp-*")]
    return left


def _stop(proc: subprocess.Popen, sig: int, tmp_path: Path, env: dict, shm: list[Path]):
    """Send ``sig``; then nothing of the run may live on, and nothing it made may remain (for
    SIGKILL: once the next kport command made its own scratch folders)."""
    proc.send_signal(sig)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"kport did not end within 20 s of {signal.Signals(sig).name}")
    stderr = proc.stderr.read().decode(errors="replace")
    if sig != signal.SIGKILL:
        assert code == EXIT[sig], stderr
        assert "Traceback" not in stderr, stderr
    end = time.monotonic() + 30  # generous: a loaded CI machine reaps slowly
    while (alive := _mentioning(str(tmp_path))) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive, f"left running: {alive}"
    if sig == signal.SIGKILL:
        _next_command(tmp_path, env)
    assert not _leftovers(tmp_path, shm)


def _next_command(tmp_path: Path, env: dict) -> None:
    """A short kport command that compiles and launches: it makes scratch folders."""
    import numpy as np

    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    (tmp_path / "copy.metal").write_text("y[thread_position_in_grid.x] = "
                                         "x[thread_position_in_grid.x];\n")
    ran = subprocess.run([*KPORT, "sim", str(tmp_path / "copy.metal"),
                          "--input", f"x={tmp_path / 'x.npy'}", "--output", "y=float32:4",
                          "--grid", "4", "--threadgroup", "4"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr


SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGKILL]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_stopped_launch_leaves_nothing(scratch, sig):
    tmp_path, env = scratch
    (tmp_path / "hang.metal").write_text(HANG)
    proc = _kport(["check", str(SAXPY), "--metal", str(tmp_path / "hang.metal"),
                   "--timeout", "100"], env)
    try:
        hosts = _wait_for(lambda: {p: c for p, c in _mentioning(str(tmp_path)).items()
                                   if "kport-simhost" in c and "/dev/shm/" in c},
                          60, "the launch never started")
        shm = _wait_for(lambda: [p for p in _launch_folders(hosts) if p.is_dir()], 5,
                        "no launch folder in /dev/shm")
        _stop(proc, sig, tmp_path, env, shm)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL],
                         ids=lambda s: signal.Signals(s).name)
def test_a_stopped_compile_leaves_nothing(scratch, sig):
    tmp_path, env = scratch
    (tmp_path / "slow.metal").write_text(SLOW)
    (tmp_path / "slow.header.metal").write_text(SLOW_HEADER)
    proc = _kport(["check", str(SAXPY), "--metal", str(tmp_path / "slow.metal"), "--header",
                   str(tmp_path / "slow.header.metal"), "--timeout", "100"], env)
    try:
        _wait_for(lambda: {p: c for p, c in _mentioning(str(tmp_path)).items()
                           if "kport-build-" in c and " -c kernel.cpp" in c},
                  180, "the compile never started")  # a loaded machine: the oracle builds first
        time.sleep(0.3)  # well inside a compile of a minute
        _stop(proc, sig, tmp_path, env, [])
    finally:
        if proc.poll() is None:
            proc.kill()


# A compiler that, like zig's, runs its work in a process of its own: here one that sleeps
# (while the file "slow" exists), with a word in its command line to find it by.
FAKE_CXX = """#!/bin/sh
case "$*" in *--version*) echo "clang version 19.1.7"; exit 0;; esac
[ -e "{flag}" ] || exit 1
sleep {marker} &
wait
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL],
                         ids=lambda s: signal.Signals(s).name)
def test_a_stopped_host_build_leaves_no_compiler_and_no_partial_file(scratch, sig):
    """kport's own simulator host is built outside the jail: its compiler, and every process
    the compiler started, must end with kport, and the partial output must not stay."""
    import random

    tmp_path, env = scratch
    shutil.rmtree(tmp_path / "home" / "cache")  # the host must be built
    marker = f"150.{random.randrange(10**6, 10**7)}"
    cxx = tmp_path / "cxx" / "bin" / "clang++"
    cxx.parent.mkdir(parents=True)
    cxx.write_text(FAKE_CXX.format(flag=tmp_path / "slow", marker=marker))
    cxx.chmod(0o755)
    (tmp_path / "slow").touch()
    env = {**env, "KPORT_CXX": str(cxx)}
    build = [sys.executable, "-c", "from runners.simbuild import host_executable\n"
             "host_executable()"]
    proc = subprocess.Popen(build, cwd=ROOT, env=env, stderr=subprocess.DEVNULL,
                            preexec_fn=_default_sigint)
    try:
        _wait_for(lambda: _mentioning(marker), 30, "the compile never started")
        proc.send_signal(sig)
        proc.wait(timeout=20)
        end = time.monotonic() + 5
        while (alive := _mentioning(marker)) and time.monotonic() < end:
            time.sleep(0.05)
        assert not alive, f"the compiler outlived kport: {alive}"
        if sig == signal.SIGKILL:  # the next build sweeps (this one fails: no "slow" file)
            (tmp_path / "slow").unlink()
            subprocess.run(build, cwd=ROOT, env=env, capture_output=True, timeout=60)
        assert not list((tmp_path / "home").rglob(".tmp-*"))
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_sweep_removes_only_what_dead_processes_left(tmp_path):
    """Never a live process's entry (not even one whose pid was reused), never an entry
    without an owner in its name."""
    from runners import lifetime

    ran = subprocess.run([sys.executable, "-c", "from runners.lifetime import owner_tag\n"
                          "print(owner_tag())"], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    dead = ran.stdout.strip()
    mine = lifetime.owner_tag()
    pid, rest = mine[1:].split("s")
    start, namespace = rest.split("n")
    reused = f"p{pid}s{int(start) + 1}n{namespace}"  # this pid, another process's start
    elsewhere = f"p{pid}s{start}n{int(namespace) + 1}"  # another PID namespace: unknown
    names = {f"kport-judge-{dead}-a": False, f".tmp-{dead}-b.so": False,
             f"kport-launch-{reused}-c": False, f"kport-judge-{mine}-d": True,
             f"kport-judge-{elsewhere}-e": True, "kport-judge-f0o1": True,
             f"other-{dead}-g": True}
    for name in names:
        (tmp_path / name).mkdir() if "." not in name else (tmp_path / name).touch()
    removed = lifetime.sweep(tmp_path)
    assert sorted(p.name for p in removed) == sorted(n for n, keep in names.items() if not keep)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for n, k in names.items() if k)


def test_temp_folders_carry_their_owner_and_sweep_first(tmp_path, monkeypatch):
    import tempfile

    from runners import lifetime

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ran = subprocess.run([sys.executable, "-c", "from runners.lifetime import temp_folder\n"
                          "t = temp_folder('kport-eval-')\nimport os\nos._exit(0)"],
                         cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)}, check=True)
    assert ran.returncode == 0
    left = list(tmp_path.glob("kport-eval-p*"))
    assert len(left) == 1  # what a killed process leaves
    with lifetime.temp_folder("kport-judge-") as folder:
        assert Path(folder).name.startswith(f"kport-judge-{lifetime.owner_tag()}-")
        assert not left[0].exists()


# A kport killed in the instant between forking a child and the child's PR_SET_PDEATHSIG:
# the child's 1 s pause before tying itself stands for that instant.
FORK_RACE = """
import subprocess, sys, time
from runners.sandbox import die_with_parent
tie = die_with_parent()
subprocess.Popen(["sleep", sys.argv[1]], preexec_fn=lambda: (time.sleep(1.0), tie()))
"""


def test_a_kport_killed_before_its_child_is_tied_leaves_nothing_running(tmp_path):
    import random

    marker = f"300.{random.randrange(10**6, 10**7)}"
    parent = subprocess.Popen([sys.executable, "-c", FORK_RACE, marker], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        _wait_for(lambda: [p for p, c in _mentioning(sys.executable).items()
                           if p != parent.pid and "-c" in c and marker in c], 30,
                  "the child was never forked")
        parent.kill()  # inside the child's pause: before its prctl
        parent.wait()
        time.sleep(2.0)  # the pause ends; a child left untied would now exec `sleep`
        assert not _mentioning(f"sleep {marker}")
    finally:
        for pid in _mentioning(marker):
            os.kill(pid, signal.SIGKILL)


# A kport killed while bubblewrap sets a jail up, before the jail's first process has tied
# itself to bubblewrap (which alone dies with kport): --block-fd holds the jail inside that
# window until kport is dead, then lets it go on.
SETUP_RACE = """
import os, subprocess, sys
from runners import sandbox
block = int(sys.argv[2])
sandbox.require_isolation()  # the jail's probe runs unheld
base_args, popen = sandbox._base_args, subprocess.Popen
sandbox._base_args = lambda bwrap: [*base_args(bwrap), "--block-fd", str(block)]
subprocess.Popen = lambda *a, pass_fds=(), **kw: popen(*a, pass_fds=(*pass_fds, block), **kw)
sandbox.Jail().run(["sleep", sys.argv[1]], timeout=600)
"""


def test_a_kport_killed_while_its_jail_is_set_up_leaves_nothing_running():
    import random

    from runners.sandbox import isolation

    if not isolation().jailed:
        pytest.skip(f"no jail on this machine: {isolation().problem}")
    marker = f"400.{random.randrange(10**6, 10**7)}"
    hold, release = os.pipe()
    parent = subprocess.Popen([sys.executable, "-c", SETUP_RACE, marker, str(hold)], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, pass_fds=(hold,))
    os.close(hold)
    try:
        jail = lambda: [p for p, c in _mentioning(marker).items()  # noqa: E731
                        if "bwrap" in c.split()[0] and p != parent.pid]
        _wait_for(lambda: len(jail()) >= 2, 60, "bubblewrap never cloned the jail")
        parent.kill()
        parent.wait()
        _wait_for(lambda: len(jail()) <= 1, 10, "bubblewrap outlived kport")
        os.write(release, b"x")  # the jail goes on: bubblewrap's tie comes too late now
        time.sleep(2.0)
        assert not _mentioning(marker), "the jail outlived kport"
    finally:
        os.close(release)
        for pid in _mentioning(marker):
            os.kill(pid, signal.SIGKILL)
