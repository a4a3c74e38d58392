"""`kport port` end to end, offline: the output package (kernel.py's run() against the saved
oracle, the generated pytest), a guessed case (case.guessed.toml), usage errors, and no API key
in anything it writes or prints."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.agent.agent_fakes import SAXPY_OK
from tests.cli import KPORT

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "corpus" / "cases"


def main(argv: list[str]) -> int:
    """`kport port` in this process: the verb's own main, with its exit code. (Usage errors,
    which the dispatcher turns into exit 2, are tested through the real CLI below.)"""
    from agent.port_cli import main as port_main

    assert argv[0] == "port"
    try:
        return port_main(argv[1:])
    except SystemExit as exit_:
        return exit_.code


def port(case: str, out: Path, *extra: str) -> int:
    folder = CASES / case
    return main(["port", str(folder / "kernel.cu"), "--case", str(folder), "--out", str(out),
                 "--offline", "--no-kb", *extra])


def load_kernel(folder: Path):
    spec = importlib.util.spec_from_file_location(f"kport_pkg_{folder.name}",
                                                  folder / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def oracle(folder: Path):
    meta = json.loads((folder / "oracle.json").read_text())
    for entry in meta["sets"]:
        data = np.load(folder / entry["file"])
        yield ({k[4:]: data[k] for k in data.files if k.startswith("arg_")},
               {k[5:]: data[k] for k in data.files if k.startswith("want_")}, entry, meta)


def test_offline_saxpy_package_runs_and_matches_its_oracle(tmp_path, capsys):
    out = tmp_path / "saxpy"
    assert port("001_saxpy", out) == 0
    assert "ACCEPTED saxpy" in capsys.readouterr().out
    for name in ("kernel.py", "kernel.metal", "report.md", "report.json", "test_kernel.py"):
        assert (out / name).is_file(), name
    k = load_kernel(out)
    for args, want, _entry, meta in oracle(out):
        got = k.run(**args)
        np.testing.assert_allclose(np.array(got["y"]), want["y"], rtol=meta["rtol"],
                                   atol=meta["atol"])
        by_position = k.saxpy(args["x"], args["y"], args["a"], args["n"])
        np.testing.assert_allclose(np.array(by_position["y"]), want["y"], rtol=meta["rtol"],
                                   atol=meta["atol"])
    x = np.ones(8, np.float32)
    with pytest.raises(TypeError, match="float32"):
        k.run(x=x.astype(np.float64), y=x, a=2.0)
    with pytest.raises(ValueError, match="dimension n"):
        k.run(x=x, y=np.ones(9, np.float32), a=2.0)
    with pytest.raises(TypeError, match="unknown argument"):
        k.run(x=x, y=x, a=2.0, z=1)
    np.testing.assert_allclose(np.array(k.run(x=x, y=x, a=2.0)["y"]), 3 * x)  # n inferred
    rep = json.loads((out / "report.json").read_text())
    assert rep["accepted"] and rep["mode"] == "offline" and rep["llm"]["calls"] == 0
    assert all(r["metal"] == "ok" for r in rep["validation"]["runs"])
    assert len(rep["validation"]["runs"]) == 6  # three size sets, two seeds
    assert rep["sanitizer"]["with_findings"] == 0
    assert "No Apple GPU timing" in rep["performance"]["note"]
    assert "launch.thread_idx" in rep["rules_used"] and "not used" in rep["kb"]
    assert "// body of the metal_kernel `saxpy`" in (out / "kernel.metal").read_text()


def test_reduction_package_needs_the_size_it_cannot_infer(tmp_path):
    out = tmp_path / "sum"
    assert port("006_sum_partials", out, "--size", "n=5000") == 0  # overrides default sizes
    runs = json.loads((out / "report.json").read_text())["validation"]["runs"]
    assert runs[0]["sizes"] == {"n": 5000, "blocks": 16} and len(runs) == 6
    k = load_kernel(out)
    args, want, entry, _ = next(oracle(out))
    assert entry["size_args"] == {"blocks": entry["sizes"]["blocks"]}
    with pytest.raises(TypeError, match="blocks="):
        k.run(**args)
    got = k.run(**args, blocks=entry["sizes"]["blocks"])
    np.testing.assert_allclose(np.array(got["partials"]), want["partials"], rtol=1e-5,
                               atol=1e-5)


def test_generated_test_kernel_passes_under_pytest(tmp_path):
    out = tmp_path / "softmax"
    assert port("012_softmax_online", out) == 0
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(out / "test_kernel.py")], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


def test_without_a_case_a_guessed_case_is_written_and_loads(tmp_path, capsys):
    from agent.case_guess import load_case_arg

    out = tmp_path / "mysaxpy"
    src = CASES / "001_saxpy" / "kernel.cu"
    assert main(["port", str(src), "--kernel", "saxpy", "--out", str(out), "--offline",
                 "--no-kb", "--size", "n=300"]) == 0
    assert not (out / "case.toml").exists()  # never case.toml: that name may be the user's
    case = load_case_arg(out / "case.guessed.toml", tmp_path / "scratch")
    assert case.id == "mysaxpy" and case.check.reference == "cuda"
    assert {a.name: a.role for a in case.args} == {"x": "in", "y": "inout", "a": "scalar",
                                                  "n": "scalar"}
    rep = json.loads((out / "report.json").read_text())
    assert rep["case_guessed"] and any("scalar a" in g for g in rep["guessed"])
    assert "Guessed (check these)" in (out / "report.md").read_text()
    assert "guessed case" in capsys.readouterr().out
    # the case holds the kernel's device code (issue 15); the source is still the user's file
    assert (out / case.cuda.source).name == "kernel.device.cu"
    assert main(["port", str(src), "--case", str(out), "--out",
                 str(tmp_path / "again"), "--offline", "--no-kb"]) == 0


def test_a_template_kernels_type_arguments_give_the_guessed_dtypes(tmp_path):
    """Issue 15: `--kernel 'op_clamp_kernel<float>'` (llama.cpp's clamp) was refused with
    "cannot guess the element type of argument 'min' ('T')"."""
    from agent.case_guess import guess_case

    src = tmp_path / "clamp.cu"
    src.write_text("""template <class T>
static __global__ void op_clamp_kernel(const T * x, T * dst, const T min, const T max,
                                       const int k) {
    const int i = blockDim.x*blockIdx.x + threadIdx.x;
    if (i >= k) {
        return;
    }
    dst[i] = x[i] < min ? min : (x[i] > max ? max : x[i]);
}
""")
    for ctype, dtype in (("float", "float32"), ("half", "float16")):
        case, _ = guess_case(src, f"op_clamp_kernel<{ctype}>", tmp_path / ctype,
                             sizes={"k": 100})
        assert {a.name: a.dtype for a in case.args} == {
            "x": dtype, "dst": dtype, "min": dtype, "max": dtype, "k": "int32"}


USAGE_ERRORS = [
    (["--kernel", "nope"], "no kernel named 'nope'"),
    (["--kernel", "saxpy", "--size", "n=abc"], "--size 'n=abc'"),
    (["--case", str(CASES / "001_saxpy"), "--size", "m=4"], "no size of that name"),
    ([], "--kernel NAME"),
    (["--kernel", "saxpy", "--chip", "M0"], "unknown chip"),
    (["--case", str(CASES / "001_saxpy"), "--grid", "4"], "--grid: with --case the launch"),
]
# Each usage error through the real dispatcher (agent.cli.main), all in one child process.
_RUN_ALL = """
import contextlib, io, json, sys
from agent.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""


def test_usage_errors_exit_2_without_a_traceback(tmp_path):
    src = str(CASES / "001_saxpy" / "kernel.cu")
    argvs = [["port", src, "--out", str(tmp_path / "o"), "--offline", *args]
             for args, _ in USAGE_ERRORS]
    proc = subprocess.run([sys.executable, "-c", _RUN_ALL, json.dumps(argvs)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for (code, err), (_, message) in zip(json.loads(proc.stdout), USAGE_ERRORS, strict=True):
        assert code == 2 and message in err and "Traceback" not in err, (message, err)
    assert not (tmp_path / "o").exists()


def test_unknown_kernel_from_the_command_line_is_one_line(tmp_path):
    src = CASES / "001_saxpy" / "kernel.cu"
    proc = subprocess.run([*KPORT, "port", str(src), "--kernel",
                           "nope", "--out", str(tmp_path / "o"), "--offline"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("kport port: error:") and "no kernel named 'nope'" in proc.stderr


def test_no_api_key_in_reports_or_stdout(tmp_path, monkeypatch, capsys, fake_llm):
    import agent.llm

    key = "sk-kport-test-0123456789abcdef"
    monkeypatch.setenv("KPORT_MODEL", "openai:gpt-4o")
    monkeypatch.setenv("KPORT_BASE_URL", f"https://me:{key}@llm.example.invalid/v1?k={key}")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    echo = SAXPY_OK.replace("```metal\n", f"```metal\n// {key}\n")  # a model echoing it
    monkeypatch.setattr(agent.llm, "_injected", fake_llm(echo).chat)
    out = tmp_path / "llm"
    folder = CASES / "001_saxpy"
    assert main(["port", str(folder / "kernel.cu"), "--case", str(folder), "--out", str(out),
                 "--no-kb", "--optimise", "0"]) == 0
    printed = capsys.readouterr()
    for text in (printed.out, printed.err, *(p.read_text() for p in out.iterdir()
                                             if p.suffix in (".json", ".md", ".py", ".metal"))):
        assert key not in text
    rep = json.loads((out / "report.json").read_text())
    assert rep["mode"] == "llm" and rep["llm"]["model"] == "openai:gpt-4o"
    assert rep["llm"]["base_url"] == "https://llm.example.invalid/v1"
    assert rep["llm"]["calls"] == 1 and rep["llm"]["total_tokens"] == 960


def test_kernel_py_carries_kports_one_size_evaluator():
    """kernel.py evaluates its size expressions with runners/sizeexpr.py's code, copied in
    whole (a package runs where kport is not installed), so the two never drift apart."""
    import ast as pyast

    from agent.package import kernel_py
    from corpus.candidate import Candidate
    from runners import sizeexpr, structs

    spec = {"params": ["x", "y"], "args": {"x": {"role": "in"}, "y": {"role": "out"}},
            "sizes": [{"n": 8}], "size_args": {}, "inputs": ["x"], "outputs": ["y"],
            "out_args": {"y": "y"}, "grid": ["ceil_div(n, 4) * 4", 1, 1],
            "threadgroup": [4, 1, 1], "template": {}, "atomic_outputs": False,
            "init_value": None}
    port = Candidate(body="y[0] = x[0];", header="", inputs=["x"], outputs=["y"],
                     grid=spec["grid"], threadgroup=spec["threadgroup"])
    text = kernel_py("copy", port, spec, "a test")
    tree = pyast.parse(text)
    # at module level it imports nothing of kport (metal_sim only where there is no Mac)
    assert not [n for n in tree.body if isinstance(n, pyast.ImportFrom)
                and (n.module or "").startswith(("runners", "corpus", "agent", "kb", "evals"))]
    namespace: dict = {}
    block = text.split("# --- kport: size evaluator")[1].split("# --- kport: end of size")[0]
    exec(compile(block.split("\n", 1)[1], "kernel.py", "exec"), namespace)
    for expr in ("ceil_div(n, 4) * 4", "n % 4 == 0 and n > 2", "max(n, 3) << 1"):
        assert namespace["evaluate"](expr, {"n": 10}) == sizeexpr.evaluate(expr, {"n": 10})
    with pytest.raises(ValueError, match="divides by zero"):
        namespace["evaluate"]("n // 0", {"n": 1})
    # and runners/structs.py's, which packs a struct parameter's fields as C lays them out
    fields = [{"name": "n", "dtype": "int64"}, {"name": "a", "dtype": "float32", "count": 2}]
    assert bytes(namespace["struct_bytes"](fields, {"n": 3, "a": [1, 2]}, None)) == \
        bytes(structs.struct_bytes(fields, {"n": 3, "a": [1, 2]}, None))


def test_dynamic_shared_memory_of_a_guessed_case(tmp_path):
    """Issue 15: a kernel with `extern __shared__` got 0 bytes and its oracle faulted with no
    way to say more; --shared-mem gives the launch's bytes (an expression over the sizes), and
    without it the guess says to."""
    from agent.case_guess import guess_case

    src = tmp_path / "rev.cu"
    src.write_text("""__global__ void rev(const float * x, float * y, int n) {
    extern __shared__ float tile[];
    int i = threadIdx.x;
    tile[i] = x[blockIdx.x * blockDim.x + i];
    __syncthreads();
    y[blockIdx.x * blockDim.x + i] = tile[blockDim.x - 1 - i];
}
""")
    case, guessed = guess_case(src, "rev", tmp_path / "a", sizes={"n": 512}, block=[256])
    assert str(case.cuda.shared_mem) == "0" and any("--shared-mem" in g for g in guessed)
    case, guessed = guess_case(src, "rev", tmp_path / "b", sizes={"n": 512}, block=[256],
                               shared_mem="256 * 4")
    assert case.cuda.shared_mem == "256 * 4" and not any("--shared-mem" in g for g in guessed)
    from corpus.check import make_inputs, run_cuda

    sizes = dict(case.sizes)
    inputs = make_inputs(case, sizes, 1)
    outs, record = run_cuda(case, sizes, inputs)  # the oracle runs with the bytes given
    assert record.ok, [str(f) for f in record.findings]
    np.testing.assert_array_equal(outs["y"].reshape(-1, 256), inputs["x"].reshape(-1, 256)[:, ::-1])


def test_a_failing_oracle_says_why_on_the_console(tmp_path, capsys):
    src = tmp_path / "rev.cu"
    src.write_text("""__global__ void rev(const float * x, float * y, int n) {
    extern __shared__ float tile[];
    tile[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    y[blockIdx.x * blockDim.x + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}
""")
    assert main(["port", str(src), "--kernel", "rev", "--out", str(tmp_path / "o"), "--offline",
                 "--no-kb", "--size", "n=512", "--block", "256"]) == 1
    out = capsys.readouterr().out
    assert "the oracle failed" in out and ": out_of_bounds: invalid memory access" in out, out
    assert "no dynamic shared memory" in out  # the likely cause, named
