"""`kport chat` driven as a user drives it: typed into a real terminal (tmux send-keys), read
off the screen (capture-pane), killed with SIGKILL twice — in the middle of a /port and at the
question before a write — and resumed each time in a new process."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

# Slow on purpose (each thread runs `reps` dependent steps), so that a check takes seconds and
# the kill below lands inside the /port, after its draft step was checkpointed.
SLOW_CU = """__global__ void damp(const float* x, float* y, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int r = 0; r < reps; ++r) acc = acc * 0.5f + x[i];
  y[i] = acc;
}
"""
SLOW_CASE = """id = "slow_damp"
title = "damped accumulation, slow on purpose"
category = "elementwise"

[cuda]
source = "kernel.cu"
kernel = "damp"
grid = ["ceil_div(n, 256)", 1, 1]
block = [256, 1, 1]

[sizes]
n = 16384
reps = 100000

[[args]]
name = "x"
role = "in"
dtype = "float32"
shape = ["n"]
init = "normal"

[[args]]
name = "y"
role = "out"
dtype = "float32"
shape = ["n"]
init = "zeros"

[[args]]
name = "n"
role = "scalar"
dtype = "int32"
value = "n"

[[args]]
name = "reps"
role = "scalar"
dtype = "int32"
value = "reps"

[check]
rtol = 1e-5
atol = 1e-5
reference = "cuda"
"""

pytestmark = [pytest.mark.slow,  # a whole port in a real terminal (tests/tiers.py)
              pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="needs tmux (apt-get install tmux; .ci/run installs it)")]


class Terminal:
    """A tmux server of its own (private socket) with one bash pane."""

    def __init__(self, tmp: Path):
        # A socket path of its own (short: sockets paths are limited to ~100 bytes).
        self.sock_dir = Path(tempfile.mkdtemp(prefix="kpt-"))
        self.sock = str(self.sock_dir / "s")
        conf = tmp / "tmux.conf"
        conf.write_text("set -g history-limit 100000\n")
        self._tmux("-f", str(conf), "new-session", "-d", "-s", "t", "-x", "200", "-y", "50",
                   "-c", str(tmp), "bash --norc --noprofile")

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", "t", "-l", text)
        self._tmux("send-keys", "-t", "t", "Enter")

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "t")

    def wait_for(self, text: str, count: int = 1, timeout: float = 240.0) -> str:
        """The screen once ``text`` is on it ``count`` times; fails after ``timeout``."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            time.sleep(0.1)
        pytest.fail(f"{text!r} (x{count}) never appeared; the screen:\n{self.screen()[-4000:]}")

    def kill_program(self) -> None:
        """SIGKILL what the shell runs (kport), as a crash or a closed laptop would."""
        shell = self._tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip()
        kids = subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True)
        pids = kids.stdout.split()
        assert pids, "nothing was running in the terminal"
        for pid in pids:
            os.kill(int(pid), 9)
        end = time.monotonic() + 30
        while subprocess.run(["pgrep", "-P", shell], capture_output=True).returncode == 0:
            assert time.monotonic() < end, "kport did not die"
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)
        shutil.rmtree(self.sock_dir, ignore_errors=True)


@pytest.fixture
def term(tmp_path):
    t = Terminal(tmp_path)
    yield t
    t.close()


def test_a_whole_port_a_kill_and_a_resume_in_a_terminal(term, tmp_path):
    case = tmp_path / "slow_damp"
    case.mkdir()
    (case / "kernel.cu").write_text(SLOW_CU)
    (case / "case.toml").write_text(SLOW_CASE)
    term.type(f"export KPORT_HOME={tmp_path / 'home'} PYTHONPATH={ROOT} PS1='$ '")
    term.type(f"kport() {{ {sys.executable} -m agent.cli \"$@\"; }}")
    term.type("kport chat slow_damp/kernel.cu")
    term.wait_for("kport[damp v1]>")

    # 1. a /port killed after its draft step: the checks have started, not finished
    term.type("/port")
    term.wait_for("draft: candidate from translator")
    term.kill_program()
    screen = term.screen()
    assert "check #1" not in screen and "port ACCEPTED" not in screen

    # 2. a new process resumes the session and the cut-off /port, from its checkpoint
    term.type("kport chat --resume last")
    term.wait_for("the last command was cut off: '/port'; running it again")
    screen = term.wait_for("kport[damp v2]>")
    assert "(continued thread chat-" in screen and "port ACCEPTED" in screen
    assert screen.count("analyze: parsed the kernel") == 1  # not run again

    # 3. without a model, questions say how to configure one; commands work
    term.type("why does the port keep the bounds check?")
    term.wait_for("need a language model")
    term.type("/check")
    term.wait_for("v2: correct at every size set and seed")
    term.type("/diff 1 2")
    term.wait_for("v1 and v2 are the same")  # the translator's draft was shipped as is

    # 4. /save asks first; killed at the question, nothing is written
    term.type("/save pkg")
    term.wait_for("[y/N]")
    term.kill_program()
    assert not (tmp_path / "pkg").exists()

    # 5. resumed, the question is asked again; yes writes the package
    term.type("kport chat --resume last")
    term.wait_for("a question was open when the session stopped")
    term.wait_for("[y/N]", count=2)
    term.type("y")
    term.wait_for(" file(s) to ")
    term.type("/sessions")
    term.wait_for("* chat-")
    term.type("/quit")
    screen = term.wait_for("continues it")
    assert {"kernel.py", "kernel.metal", "report.json", "test_kernel.py"} <= \
        {p.name for p in (tmp_path / "pkg").iterdir()}
    assert '"accepted": true' in (tmp_path / "pkg" / "report.json").read_text()
    assert "Traceback" not in screen
