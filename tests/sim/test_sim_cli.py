"""`kport sim` as a user runs it: a real subprocess on files in a temp folder."""

import json
import os
import subprocess

import numpy as np

from tests.cli import KPORT

SAXPY = """extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}"""


def kport(tmp_path, *args):
    return subprocess.run([*KPORT, "sim", *args], cwd=tmp_path,
                          capture_output=True, text=True, env=dict(os.environ), timeout=300)


def test_cuda_file_with_npy_inputs_saves_outputs(tmp_path):
    (tmp_path / "saxpy.cu").write_text(SAXPY)
    np.save(tmp_path / "x.npy", np.arange(100, dtype=np.float32))
    proc = kport(tmp_path, "saxpy.cu", "--kernel", "saxpy", "--grid", "1", "--block", "128",
                 "--arg", "x=x.npy", "--arg", "y=zeros:float32:100", "--arg", "a=float32:2",
                 "--arg", "n=int32:100", "--save", "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), np.arange(100) * 2.0)


def test_cuda_arguments_bind_by_name_in_any_order(tmp_path):
    """--arg NAME is the parameter's name: given out of order they still reach the right
    parameters (bound by position, y and x swapped would have run on the wrong buffers)."""
    (tmp_path / "saxpy.cu").write_text(SAXPY)
    np.save(tmp_path / "x.npy", np.arange(8, dtype=np.float32))
    np.save(tmp_path / "y.npy", np.full(8, 10, dtype=np.float32))
    proc = kport(tmp_path, "saxpy.cu", "--kernel", "saxpy", "--grid", "1", "--block", "8",
                 "--arg", "n=int32:8", "--arg", "y=y.npy", "--arg", "a=float32:3",
                 "--arg", "x=x.npy", "--save", "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), np.arange(8) * 3.0 + 10)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "x.npy"), np.arange(8))


def test_faulting_kernel_exits_1_and_names_the_buffer(tmp_path):
    (tmp_path / "saxpy.cu").write_text(SAXPY.replace("i < n", "i <= n"))
    np.save(tmp_path / "x.npy", np.arange(100, dtype=np.float32))
    proc = kport(tmp_path, "saxpy.cu", "--kernel", "saxpy", "--grid", "1", "--block", "128",
                 "--arg", "x=x.npy", "--arg", "y=zeros:float32:100", "--arg", "a=float32:2",
                 "--arg", "n=int32:100", "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert any("buffer 'x' at element 100" in f for f in report["findings"])


def test_mlx_body_metal_file(tmp_path):
    (tmp_path / "body.metal").write_text("uint i = thread_position_in_grid.x;\ny[i] = x[i] * 2;")
    np.save(tmp_path / "x.npy", np.arange(10, dtype=np.float32))
    proc = kport(tmp_path, "body.metal", "--input", "x=x.npy", "--output", "y=float32:10",
                 "--grid", "10", "--threadgroup", "4", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outputs"]["y"] == [2.0 * i for i in range(10)]


def test_compile_error_is_reported_with_the_users_line(tmp_path):
    (tmp_path / "bad.cu").write_text("__global__ void k(float* y) {\n  y[0] = nope;\n}\n")
    proc = kport(tmp_path, "bad.cu", "--kernel", "k", "--block", "1",
                 "--arg", "y=zeros:float32:1")
    assert proc.returncode == 1
    assert "bad.cu:2:" in proc.stdout and "Traceback" not in proc.stderr


def test_metal_body_errors_name_the_users_files(tmp_path):
    (tmp_path / "helpers.metal").write_text("inline float twice(float v) {\n"
                                            "  double d = v;\n  return float(2 * d);\n}\n")
    (tmp_path / "body.metal").write_text("uint i = thread_position_in_grid.x;\n"
                                         "threadgroup float s[4] = {0, 0, 0, 0};\n"
                                         "y[i] = twice(x[i]) + s[0];")
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    proc = kport(tmp_path, "body.metal", "--header", "helpers.metal", "--input", "x=x.npy",
                 "--output", "y=float32:4", "--grid", "4", "--threadgroup", "4")
    assert proc.returncode == 1
    assert "body.metal:2:" in proc.stdout and "initializer" in proc.stdout, proc.stdout
    (tmp_path / "body.metal").write_text("uint i = thread_position_in_grid.x;\n"
                                         "y[i] = twice(x[i]);")
    proc = kport(tmp_path, "body.metal", "--header", "helpers.metal", "--input", "x=x.npy",
                 "--output", "y=float32:4", "--grid", "4", "--threadgroup", "4")
    assert proc.returncode == 1
    assert "helpers.metal:2:" in proc.stdout and "double" in proc.stdout, proc.stdout
    assert "source.metal" not in proc.stdout + proc.stderr


def test_bad_arguments_are_clear_errors(tmp_path):
    (tmp_path / "saxpy.cu").write_text(SAXPY)
    for args, message in [
        (["saxpy.cu", "--kernel", "saxpy", "--block", "32", "--arg", "x=missing.npy"],
         "x=missing.npy: no such file"),
        (["saxpy.cu", "--kernel", "saxpy", "--block", "32", "--arg", "x"], "write NAME=file.npy"),
        (["saxpy.cu", "--block", "32"], "needs --kernel"),
        (["saxpy.cu", "--kernel", "saxpy", "--block", "0"], "positive integers"),
        (["saxpy.txt"], "no such file"),
    ]:
        proc = kport(tmp_path, *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr


def test_cuda_headers_next_to_the_source_and_nvccs_I_and_D(tmp_path):
    """As nvcc: a quoted include is found in the source's own folder (run from elsewhere), -I
    adds folders, -D defines a macro the source tests; a bad -D is one line."""
    src, inc = tmp_path / "src", tmp_path / "inc"
    src.mkdir()
    inc.mkdir()
    (src / "scale.cuh").write_text('#include "factor.cuh"  // SCALE\n'
                                   "static __device__ float scale(float v) { return SCALE * v; }\n")
    (inc / "factor.cuh").write_text("#ifdef TRIPLE\n#define SCALE 3.0f\n#else\n"
                                    "#define SCALE 2.0f\n#endif\n")
    (src / "k.cu").write_text('#include "scale.cuh"\n' + SAXPY.replace("a * x[i]", "scale(x[i])"))
    np.save(tmp_path / "x.npy", np.arange(8, dtype=np.float32))
    args = ["src/k.cu", "--kernel", "saxpy", "--grid", "1", "--block", "8", "--arg", "x=x.npy",
            "--arg", "y=zeros:float32:8", "--arg", "a=float32:0", "--arg", "n=int32:8"]
    for extra, factor in ((["-I", "inc"], 2.0), (["-I", "inc", "-D", "TRIPLE"], 3.0)):
        proc = kport(tmp_path, *args, *extra, "--save", f"out{factor:g}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        np.testing.assert_array_equal(np.load(tmp_path / f"out{factor:g}" / "y.npy"),
                                      np.arange(8) * factor)
    proc = kport(tmp_path, *args)  # factor.cuh is in no folder searched
    assert proc.returncode != 0 and "factor.cuh" in proc.stdout + proc.stderr
    proc = kport(tmp_path, *args, "-I", "inc", "-D", "1BAD")
    assert proc.returncode == 2 and "-D '1BAD'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
