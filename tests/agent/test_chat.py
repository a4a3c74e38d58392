"""`kport chat` turn by turn, in process: the real chat graph on a real SQLite checkpointer,
the real simulators, a scripted model where a model is needed. (tests/agent/test_chat_tmux.py
drives the command itself in a terminal.)"""

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from tests.agent.agent_fakes import reply
from tests.cli import KPORT

pytestmark = pytest.mark.slow  # scripted chat sessions end to end (tests/tiers.py)

ROOT = Path(__file__).parents[2]
SAXPY = ROOT / "corpus" / "cases" / "001_saxpy"


class Chat:
    """One session: ``send(line)`` runs a turn and returns what it streamed."""

    def __init__(self, home: Path, llm=None):
        from agent.chat.graph import build_chat_graph
        from agent.chat.state import ChatContext
        from agent.chat.store import open_sessions
        from runners.settings import load_settings

        self.settings = load_settings(env={"KPORT_HOME": str(home)})
        self.stack = contextlib.ExitStack()
        saver, self.index = self.stack.enter_context(open_sessions(self.settings))
        self.sid = self.index.create()
        self.ctx = ChatContext(settings=self.settings, session=self.sid, llm=llm)
        self.graph = build_chat_graph(saver)
        self.config = {"configurable": {"thread_id": self.sid}}
        self.chunks: list[str] = []

    def _stream(self, start) -> str:
        self.chunks = [str(c) for c in self.graph.stream(start, self.config, context=self.ctx,
                                                         stream_mode="custom")]
        return "".join(self.chunks)

    def send(self, line: str) -> str:
        return self._stream({"line": line})

    def answer(self, text: str) -> str:
        from langgraph.types import Command

        return self._stream(Command(resume=text))

    def question(self) -> str | None:
        snap = self.graph.get_state(self.config)
        return snap.interrupts[0].value["question"] if snap.interrupts else None

    @property
    def values(self) -> dict:
        return dict(self.graph.get_state(self.config).values)


@pytest.fixture
def chat(tmp_path, monkeypatch):
    made = []

    def make(llm=None):
        home = tmp_path / "home"
        monkeypatch.setenv("KPORT_HOME", str(home))
        made.append(Chat(home, llm))
        return made[-1]

    yield make
    for c in made:
        c.stack.close()


def test_commands_work_offline_load_show_check_apply_diff_bench(chat, tmp_path):
    c = chat()
    out = c.send(f"/load {SAXPY / 'kernel.cu'}")
    assert "loaded saxpy" in out and "case 001_saxpy" in out and "v1 (offline translator)" in out
    helped = c.send("/help")
    for name in ("/load", "/port", "/check", "/bench", "/diff", "/rules", "/analogues",
                 "/save", "/sessions", "/help"):
        assert name in helped
    rules = c.send("/rules")
    assert "launch.thread_idx" in rules  # saxpy indexes with threadIdx.x
    assert "threadgroup_barrier" in c.send("/rules sync.syncthreads")
    assert "y_out" in c.send("/show") and "__global__" in c.send("/show cuda")
    assert "v1: correct at every size set and seed" in c.send("/check")
    assert "only v1 exists" in c.send("/diff")
    broken = tmp_path / "broken.metal"
    broken.write_text("uint i = thread_position_in_grid.x;\nif (i < uint(n)) y_out[i] = x[i];\n")
    assert "v2 (edit)" in c.send(f"/apply {broken}")
    diff = c.send("/diff")
    assert "--- v1 (translator)" in diff and "+++ v2 (edit)" in diff
    assert "+if (i < uint(n)) y_out[i] = x[i];" in diff
    failed = c.send("/check")
    assert "v2: NOT correct" in failed and "runs failed" in failed
    assert c.values["checks"]["2"]["ok"] is False and c.values["checks"]["1"]["ok"] is True
    bench = c.send("/bench 1")
    assert "roofline lower bound" in bench and "No Apple GPU timing" in bench
    assert "v1 and v1 are the same" in c.send("/diff 1 1")


def test_bad_input_answers_with_an_error_and_the_session_goes_on(chat, tmp_path):
    c = chat()
    assert "unknown command /frobnicate; /help lists them" in c.send("/frobnicate")
    assert "no kernel loaded yet" in c.send("/check")
    assert "cannot read" in c.send(f"/load {tmp_path / 'missing.cu'}")
    two = tmp_path / "two.cu"
    two.write_text("__global__ void a(float* x) { x[0] = 1; }\n"
                   "__global__ void b(float* x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) x[i] = 2;\n}\n")
    out = c.send(f"/load {two}")
    assert "has 2 kernels: a, b" in out and f"/load {two} NAME" in out
    assert "has no kernel 'zz'" in c.send(f"/load {two} zz")
    # no flat thread index and no host launch: kport will not guess one (it says why)
    assert "computes no flat" in c.send(f"/load {two} a")
    guessed = c.send(f"/load {two} b")
    assert "guessed case" in guessed and "loaded b" in guessed
    assert "no version '9'" in c.send("/show 9")
    assert "unknown option --bogus" in c.send("/port --bogus")
    assert c.values["turn"] == 9  # every turn, failed or not, was recorded


def test_questions_without_a_model_say_how_to_configure_one(chat):
    c = chat()
    c.send(f"/load {SAXPY / 'kernel.cu'}")
    out = c.send("why does the port keep the bounds check?")
    assert "need a language model" in out and "KPORT_MODEL" in out
    assert "KPORT_BASE_URL" in out and f"kport chat --resume {c.sid}" in out
    assert "/port /check" in out  # what still works
    assert len(c.values["versions"]) == 1  # nothing was drafted
    _small_kb(c.settings)
    found = c.send("/search axpy kernel y = a*x + y --kind analogues")
    assert "daxpy_like" in found and "[analogues]" in found
    assert "--kind bogus: one of rules" in c.send("/search x --kind bogus")
    assert "daxpy_like" in c.send("what is an axpy?")  # the offline answer shows KB hits


@pytest.mark.slow  # builds the whole knowledge base on first use (tests/tiers.py)
def test_search_builds_the_kb_on_first_use(chat):
    c = chat()
    out = c.send("/search saxpy y = a*x + y --kind analogues")
    assert "built the knowledge base on first use at" in out and "001_saxpy" in out
    assert "built the knowledge base" not in c.send("/search softmax")  # once


def test_save_writes_only_after_yes(chat, tmp_path):
    c = chat()
    c.send(f"/load {SAXPY / 'kernel.cu'}")
    dest = tmp_path / "pkg"
    out = c.send(f"/save {dest}")
    assert "never checked; checking it first" in out
    assert c.question() and str(dest) in c.question()
    assert not dest.exists()  # nothing before the answer
    assert "not written" in c.answer("no")
    assert not dest.exists() and c.question() is None
    c.send(f"/save {dest}")
    written = c.answer("yes")
    assert "wrote" in written and c.question() is None
    rep = json.loads((dest / "report.json").read_text())
    assert rep["accepted"] is True and rep["shipped"] == "translator"
    assert any(c.sid in note for note in rep["notes"])
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "test_kernel.py"], cwd=dest, capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stdout + run.stderr


def test_port_becomes_a_version_with_its_check(chat):
    c = chat()
    c.send(f"/load {SAXPY / 'kernel.cu'}")
    out = c.send("/port --no-kb")
    assert "check #1: correct at every size set and seed" in out
    assert "port ACCEPTED" in out and "-> v2" in out
    v = c.values
    assert v["port"]["accepted"] and v["port"]["thread"] == f"{c.sid}-port1"
    # offline, the port ships the translator's draft or a mechanical rewrite of it
    assert v["versions"][1]["origin"].startswith(("port:translator", "port:opt:"))
    assert v["checks"]["2"]["ok"]


def test_model_answers_stream_cite_rules_and_become_versions(chat):
    from agent.llm import LLM

    answer = ("The bounds check stays because the grid is rounded up [launch.thread_idx]. "
              "Here is a version that reads y once:\n```metal\nuint i = "
              "thread_position_in_grid.x;\nif (i >= uint(n)) return;\nconst float yi = y[i];\n"
              "y_out[i] = a * x[i] + yi;\n```\n")
    llm = LLM("fake:scripted", GenericFakeChatModel(messages=iter([reply(answer)])))
    c = chat(llm)
    _small_kb(c.settings)
    c.send(f"/load {SAXPY / 'kernel.cu'}")
    out = c.send("can it read y only once? like an axpy kernel")
    assert len(c.chunks) > 10  # streamed piece by piece, not in one block
    assert "[launch.thread_idx]" in out
    sources = out.split("sources:")[1]
    assert "launch.thread_idx" in sources and "analogues " in sources
    assert "daxpy_like" in sources  # the KB's analogue pair, found for the question
    assert "it is v2 (chat)" in out
    assert c.values["versions"][1]["origin"] == "chat"
    # the fake model streams no usage metadata: tokens are estimated, and marked so
    assert c.values["llm_tokens"] > len(answer) // 4 and c.values["llm_tokens_estimated"]
    assert "v2: correct at every size set and seed" in c.send("/check")
    assert "+const float yi = y[i];" in c.send("/diff")


def _small_kb(settings):
    """A knowledge base holding one CUDA/Metal analogue pair."""
    from kb.ingest import code_chunks, pair_chunks
    from kb.store import KBStore

    cuda = code_chunks("__global__ void daxpy_like(const float* x, float* y, float a, int n) {\n"
                       "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                       "  if (i < n) y[i] = a * x[i] + y[i];\n}\n", "cuda", "axpy.cu", "mini")
    metal = code_chunks("kernel void daxpy_like(device const float* x, device float* y,\n"
                        "  constant float& a, uint i [[thread_position_in_grid]]) {\n"
                        "  y[i] = a * x[i] + y[i];\n}\n", "metal", "axpy.metal", "mini")
    KBStore.from_settings(settings, create=True).add(pair_chunks(cuda, metal))


def test_a_failing_model_is_reported_in_one_line(chat):
    from agent.llm import LLM

    c = chat(LLM("fake:empty", GenericFakeChatModel(messages=iter([]))))
    out = c.send("hello?")
    assert "the model call failed:" in out and "Traceback" not in out
    assert c.values["turn"] == 1


def test_session_index_resolves_ids_prefixes_and_last(tmp_path):
    from agent.chat.store import open_sessions
    from runners.errors import KportError
    from runners.settings import load_settings

    settings = load_settings(env={"KPORT_HOME": str(tmp_path)})
    with open_sessions(settings) as (_, index):
        with pytest.raises(KportError, match="no chat sessions yet"):
            index.resolve("last")
        first, second = index.create(), index.create()
        index.record_turn(first, file="k.cu", kernel="k", last="/port")
        assert index.resolve("last").id == first  # most recently used
        assert index.resolve(second).id == second
        assert index.resolve(first[:11]).id == first  # 6 of 8 hex digits: unique here
        with pytest.raises(KportError, match="ambiguous"):
            index.resolve("chat-")
        with pytest.raises(KportError, match="no chat session 'chat-nope'"):
            index.resolve("chat-nope")
        assert index.rows()[0].turns == 1 and "k (k.cu)" in index.rows()[0].line()


def test_cli_rejects_bad_arguments_with_a_clear_error(tmp_path):
    env = {**__import__("os").environ, "KPORT_HOME": str(tmp_path)}
    cmd = [*KPORT, "chat"]
    no_session = subprocess.run([*cmd, "--resume", "chat-nope"], capture_output=True,
                                text=True, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert no_session.returncode == 2 and "Traceback" not in no_session.stderr
    assert "there are no chat sessions yet" in no_session.stderr
    both = subprocess.run([*cmd, "x.cu", "--resume", "last"], capture_output=True, text=True,
                          env=env, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert both.returncode == 2 and "not both" in both.stderr
    listed = subprocess.run([*cmd, "--list"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert listed.returncode == 0 and "no chat sessions yet" in listed.stdout


def test_edit_runs_the_editor_and_scripted_sessions_work(tmp_path):
    """/edit hands the current version to $EDITOR (here a script that rewrites one line), and
    the result is a new version; stdin from a pipe works, --yes answers the write question."""
    editor = tmp_path / "editor.py"
    editor.write_text("import sys, pathlib\np = pathlib.Path(sys.argv[1])\n"
                      "p.write_text(p.read_text().replace('a * x[i]', 'x[i] * a'))\n")
    env = {**__import__("os").environ, "KPORT_HOME": str(tmp_path / "home"),
           "EDITOR": f"{sys.executable} {editor}", "PYTHONPATH": str(ROOT)}
    env.pop("VISUAL", None)
    lines = "/edit\n/diff\n/check\n/save pkg\n/quit\n"
    done = subprocess.run([*KPORT, "chat", str(SAXPY / "kernel.cu"),
                           "--yes"], input=lines, capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "v2 (edit) from" in out and "+++ v2 (edit)" in out
    assert "v2: correct at every size set and seed" in out
    assert "[y/N] yes (--yes)" in out and (tmp_path / "pkg" / "kernel.py").is_file()
    assert "x[i] * a" in (tmp_path / "pkg" / "kernel.metal").read_text()


def test_a_session_open_in_one_terminal_is_refused_in_another(tmp_path):
    from agent.chat.store import hold
    from runners.errors import KportError
    from runners.settings import load_settings

    settings = load_settings(env={"KPORT_HOME": str(tmp_path)})
    with hold(settings, "chat-0000aaaa"):
        with pytest.raises(KportError, match="open in another terminal"):
            with hold(settings, "chat-0000aaaa"):
                pass
        with hold(settings, "chat-0000bbbb"):  # another session is fine
            pass
    with hold(settings, "chat-0000aaaa"):  # released on exit
        pass
