"""`kport kb` as a user runs it: the JSON contracts, errors without tracebacks, a real Chroma
server on loopback, and the llama.cpp importer on a generated miniature checkout."""

import json
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

CASES = Path(__file__).parents[2] / "corpus" / "cases"


@pytest.mark.slow  # reads the whole knowledge base, built once (tests/tiers.py)
def test_search_json_contract(cli, built_home):
    proc = cli("kb", "search", "online softmax simd_max", "-k", "4", "--json", home=built_home)
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    assert len(hits) == 4
    for h in hits:
        assert {"id", "kind", "title", "score", "text", "metadata"} <= set(h)
        assert h["kind"] in {"rules", "arch", "analogues", "docs", "fixes"}
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.slow  # reads the whole knowledge base, built once (tests/tiers.py)
def test_search_by_file_with_kind_and_pairs(cli, built_home):
    src = CASES / "017_gemv_warp_per_row" / "kernel.cu"
    proc = cli("kb", "search", f"@{src}", "--kind", "analogues", "--language", "cuda",
                 "-k", "3", "--json", home=built_home)
    hits = json.loads(proc.stdout)
    assert hits[0]["metadata"]["case"] == "017_gemv_warp_per_row"
    assert hits[0]["pair"]["language"] == "metal"
    assert {h["kind"] for h in hits} == {"analogues"}


def test_rules_json_contract(cli):
    proc = cli("kb", "rules", str(CASES / "012_softmax_online" / "kernel.cu"),
                 "--kernel", "softmax_online", "--json")
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    ids = [h["rule_id"] for h in hits]
    assert {"sync.syncthreads", "warp.shfl_xor", "memory.static_shared"} <= set(ids)
    for h in hits:
        assert {"rule_id", "cuda", "metal", "occurrences", "lines"} <= set(h)
        assert h["occurrences"] >= 1 and h["lines"] == sorted(h["lines"])
    firsts = [h["lines"][0] for h in hits]
    assert firsts == sorted(firsts)


def test_rules_for_a_file_without_cuda_constructs_says_so(cli, tmp_path):
    (tmp_path / "host.cu").write_text("int main() { return 0; }\n")
    proc = cli("kb", "rules", str(tmp_path / "host.cu"))
    assert proc.returncode == 0 and proc.stdout == ""
    assert "no concept rule applies to" in proc.stderr and "host.cu" in proc.stderr


@pytest.mark.slow  # reads the whole knowledge base, built once (tests/tiers.py)
def test_stats_json(cli, built_home):
    proc = cli("kb", "stats", "--json", home=built_home)
    s = json.loads(proc.stdout)
    assert s["collections"]["rules"] >= 150 and s["collections"]["analogues"] >= 80
    assert s["sources"]["corpus"] == s["collections"]["analogues"]


@pytest.mark.parametrize("args,message", [
    (("kb", "stats"), "no knowledge base at"),  # `kb search` builds one on first use
    (("kb", "rules", "/nonexistent.cu"), "/nonexistent.cu: cannot read"),
    (("kb", "add", "/nonexistent-dir"), "no such file or folder"),
    (("kb", "import-llama-cpp", "/nonexistent.tar.gz"), "no such file or folder"),
    (("kb", "search", "  "), "the query is empty"),  # not the store's first chunks as "hits"
])
def test_errors_are_for_people(cli, fresh_home, args, message):
    proc = cli(*args, home=fresh_home)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_empty_query_file_and_a_tree_of_skipped_files_are_errors(cli, fresh_home, tmp_path):
    (tmp_path / "empty.cu").write_text("\n")
    proc = cli("kb", "search", f"@{tmp_path / 'empty.cu'}", home=fresh_home)
    assert proc.returncode == 2 and "empty.cu: the query file is empty" in proc.stderr
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("a.cu", "b.metal"):
        (tree / name).write_bytes(b"\x00\x01binary")
    proc = cli("kb", "add", str(tree), home=fresh_home)  # was "0 chunks added", exit 0
    assert proc.returncode == 2, proc.stderr
    assert "nothing to add: every file was skipped" in proc.stderr and "1 more" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow  # reads the whole knowledge base, built once (tests/tiers.py)
def test_unknown_kernel_and_feature_errors(cli, built_home):
    proc = cli("kb", "rules", str(CASES / "001_saxpy" / "kernel.cu"), "--kernel", "nope")
    assert proc.returncode == 2 and "no kernel named 'nope'; kernels here: saxpy" in proc.stderr
    proc = cli("kb", "search", "x", "--feature", "wrap", home=built_home)
    assert proc.returncode == 2 and "unknown feature 'wrap'" in proc.stderr


def _llama_tree(root: Path) -> Path:
    top = root / "llama_cpp_python-9.9.9" / "vendor" / "llama.cpp" / "ggml" / "src"
    (top / "ggml-cuda").mkdir(parents=True)
    (top / "ggml-metal" / "kernels").mkdir(parents=True)
    (top / "ggml-cuda" / "softmax.cu").write_text(
        "static __global__ void soft_max_f32(const float* x, float* y, int n) {\n"
        "  y[threadIdx.x] = expf(x[threadIdx.x]);\n}\n")
    (top / "ggml-cuda" / "norm.cu").write_text(
        "static __global__ void rms_norm_f32(const float* x, float* y, int n) {\n"
        "  y[threadIdx.x] = rsqrtf(x[threadIdx.x]);\n}\n")
    (top / "ggml-metal" / "kernels" / "softmax.metal").write_text(
        "kernel void kernel_soft_max(device const float* x [[buffer(0)]], device float* y "
        "[[buffer(1)]], uint i [[thread_position_in_grid]]) { y[i] = exp(x[i]); }\n")
    (top / "ggml-metal" / "ggml-metal.m").write_text("// objective-c, ignored\n")
    archive = root / "llama_cpp_python-9.9.9.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root / "llama_cpp_python-9.9.9", arcname="llama_cpp_python-9.9.9")
    return archive


@pytest.mark.slow  # kb writes end to end; a Chroma server (tests/tiers.py)
def test_import_llama_cpp_archive_pairs_and_remove(cli, fresh_home, tmp_path):
    archive = _llama_tree(tmp_path)
    proc = cli("kb", "import-llama-cpp", str(archive), "--json", home=fresh_home)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    # rms_norm_f32 has no Metal counterpart: left out (kb/cli.py, --keep-unpaired)
    assert (out["added"], out["pairs"], out["pairing"]["cuda_left_out"]) == (2, 1, 1)
    proc = cli("kb", "search", "soft_max_f32", "--kind", "analogues", "--language", "cuda",
                 "-k", "1", "--json", home=fresh_home)
    hit = json.loads(proc.stdout)[0]
    assert hit["metadata"]["source"] == "llama.cpp:9.9.9"
    assert hit["pair"]["metadata"]["kernel"] == "kernel_soft_max"
    proc = cli("kb", "remove", "llama.cpp:9.9.9", "--json", home=fresh_home)
    assert json.loads(proc.stdout)["removed"] == {"analogues": 2}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # kb writes end to end; a Chroma server (tests/tiers.py)
def test_shared_kb_on_a_real_chroma_server(cli, tmp_path, fresh_home):
    chroma = Path(sys.executable).parent / "chroma"
    port = _free_port()
    server = subprocess.Popen([str(chroma), "run", "--path", str(tmp_path / "server"),
                               "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        src = tmp_path / "k.cu"
        src.write_text("__global__ void histogram_u8(const unsigned char* x, unsigned* h) {\n"
                       "  atomicAdd(&h[x[threadIdx.x]], 1u);\n}\n")
        proc = cli("kb", "add", str(src), "--source", "team", "--url", url, "--json",
                     home=fresh_home)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["added"] == 1
        # Another user (another home) sees it through the server, not through a local store.
        other = tmp_path / "other-home"
        proc = cli("kb", "search", "histogram atomics", "--url", url, "--json", home=other)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)[0]["metadata"]["kernel"] == "histogram_u8"
        assert not (other / "kb").exists()
    finally:
        server.terminate()
        server.wait(timeout=30)
    proc = cli("kb", "stats", "--url", url, home=fresh_home)
    assert proc.returncode == 2 and "cannot reach the Chroma server" in proc.stderr


def test_lint_exit_code_and_json(cli, tmp_path):
    body = tmp_path / "k.metal"
    body.write_text("threadgroup float s[BLOCK];\nuint i = thread_position_in_grid.x;\n"
                    "s[i % BLOCK] = x[i];\nthreadgroup_barrier(mem_flags::mem_threadgroup);\n"
                    "y[i] = s[0];\n")
    ok = cli("kb", "lint", str(body), "--threadgroup", "256,1,1", "--template", "BLOCK=256",
             "--json")
    assert ok.returncode == 0, ok.stderr
    assert not [x for x in json.loads(ok.stdout) if x["severity"] == "error"]
    bad = cli("kb", "lint", str(body), "--threadgroup", "256", "--template", "BLOCK=16384",
              "--json")
    assert bad.returncode == 1
    assert "tgmem.over_limit" in {x["id"] for x in json.loads(bad.stdout)}
    usage = cli("kb", "lint", str(body), "--template", "BLOCK")
    assert usage.returncode == 2 and "expected NAME=VALUE" in usage.stderr


def test_fixes_for_a_message(cli):
    proc = cli("kb", "fixes", "source.metal:3:5: error: use of undeclared identifier "
               "'__syncthreads'", "--json")
    found = json.loads(proc.stdout)
    assert proc.returncode == 0 and found
    assert any("threadgroup_barrier" in f["fix"] for f in found)


@pytest.mark.slow  # kb writes end to end; a Chroma server (tests/tiers.py)
def test_add_pairs_and_export_import_round_trip(cli, fresh_home, tmp_path):
    cu, mt = tmp_path / "cuda", tmp_path / "metal"
    cu.mkdir()
    mt.mkdir()
    (cu / "ops.cu").write_text("__global__ void rms_norm_f32(const float* x, float* y) {\n"
                               "  y[threadIdx.x] = rsqrtf(x[threadIdx.x]);\n}\n")
    (mt / "ops.metal").write_text("kernel void kernel_rms_norm(device const float* x, device "
                                  "float* y, uint i [[thread_position_in_grid]]) {\n"
                                  "  y[i] = rsqrt(x[i]);\n}\n")
    proc = cli("kb", "add-pairs", str(cu), str(mt), "--source", "mine", "--json",
               home=fresh_home)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pairs"] == 1
    dump = tmp_path / "kb.jsonl"
    assert cli("kb", "export", str(dump), home=fresh_home).returncode == 0
    other = tmp_path / "other-home"
    proc = cli("kb", "import", str(dump), "--json", home=other)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"added": 2, "present": 0}
    hit = json.loads(cli("kb", "search", "rms norm", "--language", "cuda", "-k", "1", "--json",
                         home=other).stdout)[0]
    assert hit["pair"]["metadata"]["kernel"] == "kernel_rms_norm"
