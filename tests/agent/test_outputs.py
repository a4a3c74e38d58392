"""Outputs never destroy what the user has (issue 21): `kport port --out`, `kport eval --out` and
`kport report --out` refuse a folder holding the user's files before any work (unless --force),
replace a folder of their own whole, and a kill while the package is written leaves the old
package. Each runs the real CLI in a child process with a private KPORT_HOME."""

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import KPORT, kport_env
from tests.cli import kport as run_kport

pytestmark = pytest.mark.slow  # several kport ports end to end, killed writes (tests/tiers.py)

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "corpus" / "cases" / "001_saxpy"
SOFTMAX = ROOT / "corpus" / "cases" / "012_softmax_online"


def kport(home: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return run_kport(*args, env={"KPORT_HOME": str(home)}, timeout=timeout)


def port(home: Path, out: Path, *extra: str, case: Path = SAXPY) -> subprocess.CompletedProcess:
    return kport(home, "port", str(case / "kernel.cu"), "--case", str(case), "--out", str(out),
                 "--offline", "--no-kb", *extra)


def guess_port(home: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return kport(home, "port", str(SAXPY / "kernel.cu"), "--kernel", "saxpy", "--out", str(out),
                 "--offline", "--no-kb", "--size", "n=300", *extra)


def tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) -> sha256 of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def user_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "oracle_7.npz").write_bytes(b"the user's own oracle\x00\x01")
    (path / "case.toml").write_text('id = "mine"\n')
    (path / "kernel.py").write_text("# my own kernel.py\n")
    return path


def beside(folder: Path) -> list[str]:
    """Hidden leftovers of kport's writes next to ``folder``."""
    return sorted(p.name for p in folder.parent.iterdir() if ".kport-" in p.name)


def test_port_into_a_user_folder_is_refused_before_any_work(tmp_path):
    out = user_folder(tmp_path / "mine")
    before = tree(out)
    proc = guess_port(tmp_path / "home", out)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert str(out) in proc.stderr and "--force" in proc.stderr and "another folder" in proc.stderr
    assert "oracle_7.npz" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "home").exists()  # refused up front: no port ran (it makes KPORT_HOME)
    assert tree(out) == before and beside(out) == []


def test_port_with_force_writes_the_package_and_leaves_the_users_other_files(tmp_path):
    out = user_folder(tmp_path / "mine")
    mine = {k: v for k, v in tree(out).items() if k != "kernel.py"}
    proc = guess_port(tmp_path / "home", out, "--force")
    assert proc.returncode == 0, proc.stderr
    after = tree(out)
    assert {k: after[k] for k in mine} == mine  # oracle_7.npz and case.toml untouched
    assert "case.guessed.toml" in after and ".kport-package" in after
    assert "kport port" in (out / "kernel.py").read_text() or "kport" in after
    assert (out / "case.toml").read_text() == 'id = "mine"\n'
    assert beside(out) == [] and not list(out.glob(".kport-new-*"))


def test_port_twice_into_its_own_folder_replaces_it_whole(tmp_path):
    home, out = tmp_path / "home", tmp_path / "pkg"
    assert port(home, out, case=SOFTMAX).returncode == 0
    first = tree(out)
    proc = port(home, out)  # another kernel into the same folder: nothing of the first stays
    assert proc.returncode == 0, proc.stderr
    second = tree(out)
    assert ".kport-package" in second and "saxpy" in (out / "kernel.py").read_text()
    assert not set(second) - {"kernel.py", "kernel.metal", "test_kernel.py", "oracle.json",
                              "report.md", "report.json", ".kport-package", "oracle_0.npz",
                              "oracle_1.npz", "oracle_2.npz"}
    assert second != first and beside(out) == []
    test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(out / "test_kernel.py")], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert test.returncode == 0, test.stdout + test.stderr
    assert port(home, out).returncode == 0  # __pycache__ from the test run is no user file


def test_out_naming_a_file_is_refused_at_once(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n")
    proc = guess_port(tmp_path / "home", target)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"--out {target}: a file, not a folder" in proc.stderr
    assert not (tmp_path / "home").exists() and target.read_text() == "my notes\n"
    proc = guess_port(tmp_path / "home", target / "sub")
    assert proc.returncode == 2 and "cannot be created" in proc.stderr, proc.stderr


def test_the_guessed_case_is_never_case_toml_and_a_corrected_one_is_kept(tmp_path):
    home, out = tmp_path / "home", tmp_path / "pkg"
    proc = guess_port(home, out)
    assert proc.returncode == 0, proc.stderr
    assert not (out / "case.toml").exists() and (out / "case.guessed.toml").is_file()
    assert f"--case {out / 'case.guessed.toml'}" in proc.stdout
    guessed = out / "case.guessed.toml"
    guessed.write_text(guessed.read_text().replace("seeds = 2", "seeds = 1"))
    corrected = guessed.read_bytes()
    # the package holds the kernel's device code as the case's CUDA source (issue 15)
    proc = kport(home, "port", str(out / "kernel.device.cu"), "--case", str(guessed), "--out",
                 str(out), "--offline", "--no-kb")
    assert proc.returncode == 0, proc.stderr
    assert guessed.read_bytes() == corrected and (out / "kernel.py").is_file()
    before = tree(out)
    proc = guess_port(home, out)  # a new guess would replace the user's corrected case
    assert proc.returncode == 2 and "case.guessed.toml" in proc.stderr, proc.stderr
    assert tree(out) == before


# The real CLI in a child that SIGKILLs itself at a chosen point of the write: after the new
# package is complete in its stage (before the swap), or between the swap's two renames (the old
# package renamed aside, the new one not yet in place). Killing from outside at the right moment
# depends on the machine's load; this is exact.
_KILL_AT = {
    "stage written": """
real = out_folder._write_marker
def hook(*a, **k):
    real(*a, **k)
    os.kill(os.getpid(), signal.SIGKILL)
out_folder._write_marker = hook
""",
    "between the renames": """
real = os.rename
def hook(src, dst):
    real(src, dst)
    if ".kport-old-" in str(dst):
        os.kill(os.getpid(), signal.SIGKILL)
out_folder.os.rename = hook
""",
}


def killed_port(home: Path, out: Path, point: str) -> subprocess.CompletedProcess:
    env = kport_env({"KPORT_HOME": str(home)})
    child = ("import os, signal, sys\nfrom agent import out_folder\n" + _KILL_AT[point]
             + "from agent.cli import main\nsys.exit(main())\n")
    return subprocess.run([sys.executable, "-c", child, "port", str(SOFTMAX / "kernel.cu"),
                           "--case", str(SOFTMAX), "--out", str(out), "--offline", "--no-kb"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


def killed_second_port(tmp_path: Path, point: str) -> tuple[Path, Path, dict[str, str]]:
    """(KPORT_HOME, the package folder, its files before): a port written, then a second one
    into the same folder killed at ``point``."""
    home, out = tmp_path / "home", tmp_path / "pkg"
    assert port(home, out, case=SOFTMAX).returncode == 0
    before = tree(out)
    proc = killed_port(home, out, point)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert beside(out), "the killed write left nothing beside the folder: it was not mid-write"
    return home, out, before


def test_a_kill_while_the_package_is_written_leaves_the_old_package(tmp_path):
    home, out, before = killed_second_port(tmp_path, "stage written")
    assert tree(out) == before  # the old package, whole
    # the next write puts the old package back (or finds it in place) and cleans up
    assert port(home, out).returncode == 0
    assert beside(out) == [] and "saxpy" in (out / "kernel.py").read_text()


def test_a_kill_between_the_renames_is_recovered_before_the_next_write_reads(tmp_path):
    _, out, before = killed_second_port(tmp_path, "between the renames")
    assert not out.exists()  # the old package is aside, the new one not yet in place
    from agent.out_folder import check_out_folder
    check_out_folder(out, force=False)  # what every write does first
    assert tree(out) == before  # the old package, whole


def test_eval_and_report_refuse_a_user_folder(tmp_path):
    home = tmp_path / "home"
    out = user_folder(tmp_path / "mine")
    (out / "report.md").write_text("my report\n")
    before = tree(out)
    run = tmp_path / "run"  # a finished run of no cases is enough for `kport report`
    run.mkdir()
    (run / "run.json").write_text('{"settings": {"mode": "offline", "seeds": 3}}\n')
    (run / "results.jsonl").write_text("")
    for args in (["eval", "001", "--out", str(out)], ["report", str(run), "--out", str(out)]):
        proc = kport(home, *args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "--force" in proc.stderr and str(out) in proc.stderr
    assert tree(out) == before
    proc = kport(home, "report", str(run), "--out", str(tmp_path / "rep"))
    assert proc.returncode == 0, proc.stderr
    assert kport(home, "report", str(run), "--out", str(tmp_path / "rep")).returncode == 0
    assert kport(home, "report", str(run)).returncode == 0  # into the run folder itself
    assert (run / "report.html").is_file() and beside(run) == []


def test_chat_save_refuses_a_user_folder_and_replaces_its_own(tmp_path):
    mine = user_folder(tmp_path / "mine")
    before = tree(mine)
    env = {**os.environ, "KPORT_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    lines = f"/save {mine}\n/save pkg\n/save pkg\n/quit\n"
    done = subprocess.run([*KPORT, "chat", str(SAXPY / "kernel.cu"),
                           "--yes"], input=lines, capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert f"error: /save {mine}: holds files kport did not write" in done.stdout
    assert tree(mine) == before
    assert done.stdout.count("wrote ") == 2 and (tmp_path / "pkg" / ".kport-package").is_file()
    assert beside(tmp_path / "pkg") == []
