"""Every fault the simulators must catch is reported as a finding naming what and where, never a
hang or a crash of the parent process."""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel
from runners.metal_sim import metal_kernel
from runners.simfaults import CompileError, KernelFault
from runners.srcrewrite import SourceError


def _metal(source, inputs, out_shape, grid, tg, header="", names=("x",), out_dtype="float32"):
    import mlx.core as mx

    k = metal_kernel("fault", list(names), ["y"], source, header)
    return k.launch(inputs=inputs, output_shapes=[out_shape],
                    output_dtypes=[getattr(mx, out_dtype)], grid=grid, threadgroup=tg)


def _kinds(run):
    return [f.kind for f in run.findings]


def _cuda(code, name, grid, block, args, shared_mem=0):
    return RawKernel(code, name).launch(grid, block, args, shared_mem=shared_mem)


X16 = np.arange(16, dtype=np.float32)


@pytest.mark.parametrize("source, buffer, index", [
    ("uint i = thread_position_in_grid.x;\ny[i + 1] = x[i];", "y", 16),
    ("uint i = thread_position_in_grid.x;\ny[i] = x[i + 3];", "x", 16),
    ("int i = int(thread_position_in_grid.x);\ny[i] = x[i - 2];", "x", -2),
])
def test_metal_out_of_bounds_names_buffer_index_and_line(source, buffer, index):
    run = _metal(source, [X16], (16,), (16, 1, 1), (16, 1, 1))
    oob = [f for f in run.findings if f.kind == "out_of_bounds"]
    assert oob, run.findings
    assert f"buffer '{buffer}' at element {index}" in oob[0].message
    assert (oob[0].file, oob[0].line) == ("source.metal", 2)


def test_fast_mode_still_catches_an_overflowing_write(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_CHECKS", "fast")
    run = _metal("uint i = thread_position_in_grid.x;\ny[i + 4096] = x[i];", [X16], (16,),
                 (16, 1, 1), (16, 1, 1))
    assert "out_of_bounds" in _kinds(run)
    assert "buffer 'y'" in run.findings[0].message


def test_threadgroup_array_out_of_bounds():
    src = """threadgroup float s[16];
uint t = thread_position_in_threadgroup.x;
s[t + 1] = x[t];
threadgroup_barrier(mem_flags::mem_threadgroup);
y[t] = s[t];"""
    run = _metal(src, [X16], (16,), (16, 1, 1), (16, 1, 1))
    msgs = [f.message for f in run.findings if f.kind == "out_of_bounds"]
    assert any("threadgroup variable 's'" in m for m in msgs), run.findings


def test_write_write_race_on_threadgroup_memory():
    src = """threadgroup float s[1];
s[0] = x[thread_position_in_threadgroup.x];
threadgroup_barrier(mem_flags::mem_threadgroup);
y[thread_position_in_threadgroup.x] = s[0];"""
    run = _metal(src, [X16], (16,), (16, 1, 1), (16, 1, 1))
    race = [f for f in run.findings if f.kind == "race"]
    assert race and "written by thread" in race[0].message and "'s'" in race[0].message


def test_read_write_race_without_barrier_between():
    src = """threadgroup float s[32];
uint t = thread_position_in_threadgroup.x;
s[t] = x[t];
threadgroup_barrier(mem_flags::mem_threadgroup);
float v = s[(t + 1) % 32];
s[t] = v * 2;
threadgroup_barrier(mem_flags::mem_threadgroup);
y[t] = s[t];"""
    run = _metal(src, [np.arange(32, dtype=np.float32)], (32,), (64, 1, 1), (32, 1, 1))
    assert "race" in _kinds(run), run.findings


def test_correct_barriers_give_no_findings():
    src = """threadgroup float s[32];
uint t = thread_position_in_threadgroup.x;
s[t] = x[t];
threadgroup_barrier(mem_flags::mem_threadgroup);
float v = s[(t + 1) % 32];
threadgroup_barrier(mem_flags::mem_threadgroup);
s[t] = v * 2;
threadgroup_barrier(mem_flags::mem_threadgroup);
y[t] = s[t];"""
    x = np.arange(32, dtype=np.float32)
    run = _metal(src, [x], (32,), (32, 1, 1), (32, 1, 1))
    assert run.ok, run.findings
    np.testing.assert_array_equal(np.array(run.outputs[0]), np.roll(x, -1) * 2)


def test_uninitialised_threadgroup_read():
    src = """threadgroup float s[32];
uint t = thread_position_in_threadgroup.x;
if (t < 16) s[t] = x[t];
threadgroup_barrier(mem_flags::mem_threadgroup);
y[t] = s[31 - t];"""
    run = _metal(src, [np.arange(32, dtype=np.float32)], (32,), (32, 1, 1), (32, 1, 1))
    assert "uninitialized" in _kinds(run)


def test_barrier_reached_by_part_of_the_group_is_divergence_not_a_hang():
    src = """uint t = thread_position_in_threadgroup.x;
if (t >= 8) return;
threadgroup_barrier(mem_flags::mem_threadgroup);
y[t] = x[t];"""
    run = _metal(src, [X16], (16,), (16, 1, 1), (16, 1, 1))
    div = [f for f in run.findings if f.kind == "divergence"]
    assert div and "8 of 16 threads" in div[0].message


def test_threads_at_different_barriers_is_divergence():
    code = r"""extern "C" __global__ void k(float* y) {
  if (threadIdx.x % 2) { __syncthreads(); y[threadIdx.x] = 1; }
  else { __syncthreads(); y[threadIdx.x] = 2; }
}"""
    run = _cuda(code, "k", (1,), (32,), [np.zeros(32, np.float32)])
    div = [f for f in run.findings if f.kind == "divergence"]
    assert div and "different barriers" in div[0].message


def test_warp_shuffle_with_exited_lanes_in_its_mask_is_divergence():
    code = r"""extern "C" __global__ void k(float* y) {
  if (threadIdx.x >= 16) return;
  y[threadIdx.x] = __shfl_down_sync(0xffffffff, (float)threadIdx.x, 1);
}"""
    run = _cuda(code, "k", (1,), (32,), [np.zeros(32, np.float32)])
    div = [f for f in run.findings if f.kind == "divergence"]
    assert div and "member mask 0xffffffff" in div[0].message


def test_infinite_loop_ends_at_the_timeout(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_TIMEOUT", "3")
    code = r"""extern "C" __global__ void k(volatile int* flag) { while (flag[0] == 0) {} }"""
    run = _cuda(code, "k", (1,), (1,), [np.zeros(1, np.int32)])
    assert _kinds(run) == ["timeout"]


def test_a_crash_ends_only_the_child():
    code = r"""extern "C" __global__ void k(float* y) { float* p = (float*)0x10; p[0] = y[0]; }"""
    run = _cuda(code, "k", (1,), (1,), [np.zeros(1, np.float32)])
    assert _kinds(run) == ["out_of_bounds"]
    assert "invalid memory access" in run.findings[0].message
    ok = _cuda(r"""extern "C" __global__ void k(float* y) { y[0] = 7; }""", "k", (1,), (1,),
               [np.zeros(1, np.float32)])
    assert ok.ok


def test_trap_is_reported_as_a_crash():
    run = _cuda(r"""extern "C" __global__ void k(float* y) { __builtin_trap(); }""", "k", (1,),
                (1,), [np.zeros(1, np.float32)])
    assert run.findings and "signal" in run.findings[0].message


def test_huge_thread_local_array_is_a_stack_limit_not_a_crash():
    code = r"""extern "C" __global__ void k(float* y) {
  volatile float big[200000]; big[threadIdx.x] = 1; __syncthreads();
  y[threadIdx.x] = big[threadIdx.x]; }"""
    run = _cuda(code, "k", (1,), (2,), [np.zeros(2, np.float32)])
    assert run.findings and run.findings[0].kind == "limit"
    assert "stack" in run.findings[0].message


def test_threadgroup_memory_over_the_apple_limit_names_the_variable():
    src = """threadgroup float big[9000];
big[thread_position_in_threadgroup.x] = 1;
y[0] = big[0];"""
    run = _metal(src, [X16], (1,), (1, 1, 1), (1, 1, 1))
    assert run.findings[0].kind == "limit"
    assert "'big' (36000 bytes)" in run.findings[0].message


def test_static_shared_over_48k_is_a_limit():
    code = r"""extern "C" __global__ void k(float* y) {
  __shared__ float big[13000]; big[threadIdx.x] = 1; y[0] = big[0]; }"""
    run = _cuda(code, "k", (1,), (1,), [np.zeros(1, np.float32)])
    assert run.findings[0].kind == "limit"


def test_dynamic_shared_memory_bounds():
    code = r"""extern "C" __global__ void k(float* y) {
  extern __shared__ float dyn[]; dyn[threadIdx.x] = 1; __syncthreads();
  y[threadIdx.x] = dyn[0]; }"""
    run = _cuda(code, "k", (1,), (32,), [np.zeros(32, np.float32)], shared_mem=64)
    assert "out_of_bounds" in _kinds(run)
    assert "dynamic shared memory" in run.findings[0].message


def test_output_too_large_is_refused_before_running():
    import mlx.core as mx

    k = metal_kernel("huge", ["x"], ["y"], "y[0] = x[0];")
    with pytest.raises(ValueError, match="output"):
        k.launch(inputs=[X16], output_shapes=[(1 << 20, 1 << 20)], output_dtypes=[mx.float32],
                 grid=(1, 1, 1), threadgroup=(1, 1, 1))


def test_compile_errors_point_at_the_users_source_and_header():
    import mlx.core as mx

    k = metal_kernel("bad", ["x"], ["y"], "float a = 1;\ny[0] = x[0] + b;",
                     header="inline float twice(float v) {\n  return 2 * w;\n}\n")
    with pytest.raises(CompileError) as err:
        k(inputs=[X16], output_shapes=[(1,)], output_dtypes=[mx.float32], grid=(1, 1, 1),
          threadgroup=(1, 1, 1))
    places = {(d.file, d.line) for d in err.value.diagnostics if d.severity == "error"}
    assert ("source.metal", 2) in places and ("header.metal", 2) in places


def test_cuda_compile_error_points_at_the_cu_file():
    run = RawKernel("__global__ void k(float* y) {\n  y[0] = undefined_name;\n}", "k",
                    filename="mine.cu").launch((1,), (1,), [np.zeros(1, np.float32)])
    assert not run.compiled
    assert [(d.file, d.line) for d in run.diagnostics if d.severity == "error"] == [("mine.cu", 2)]


def test_inline_ptx_is_refused_naming_construct_and_line():
    """PTX kport does not lower (runners/ptx.py: `mov` of a register it does)."""
    code = ('extern "C" __global__ void k(int* y) {\n  int v = 1;\n'
            '  asm volatile("bar.arrive 1, 64;");\n  y[0] = v;\n}')
    with pytest.raises(SourceError, match=r"kernel\.cu:3: inline PTX assembly `bar\.arrive"):
        RawKernel(code, "k").launch((1,), (1,), [np.zeros(1, np.int32)])


def test_printf_is_captured():
    code = r"""extern "C" __global__ void k(int* y) {
  if (threadIdx.x == 3) printf("lane %d says %d\n", threadIdx.x, y[0]); }"""
    run = _cuda(code, "k", (1,), (8,), [np.full(1, 42, np.int32)])
    assert run.ok and run.printf == "lane 3 says 42\n"


def test_drop_in_raises_kernel_fault_with_findings():
    import mlx.core as mx

    k = metal_kernel("oob", ["x"], ["y"], "y[thread_position_in_grid.x + 1] = x[0];")
    with pytest.raises(KernelFault) as err:
        k(inputs=[X16], output_shapes=[(4,)], output_dtypes=[mx.float32], grid=(4, 1, 1),
          threadgroup=(4, 1, 1))
    assert err.value.findings and "buffer 'y'" in str(err.value)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"),
                    reason="PR_SET_PDEATHSIG is Linux's; elsewhere children are not tied")
def test_a_killed_kport_leaves_no_jailed_process_running(tmp_path):
    """A jailed command (as a launch or a compile is) must die with kport: SIGKILL the parent,
    as a crash would, and the jailed process must not run on as an orphan."""
    import os
    import random
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    marker = f"120.{random.randrange(10**6, 10**7)}"  # `sleep 120.1234567`: found in /proc
    parent = subprocess.Popen([sys.executable, "-c", (
        "from runners.sandbox import Jail\n"
        f"Jail().run(['sleep', '{marker}'], timeout=200)\n")], cwd=Path(__file__).parents[2])

    end = time.monotonic() + 20
    while not _alive_with(marker):
        assert time.monotonic() < end, "the jailed command never started"
        time.sleep(0.05)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    end = time.monotonic() + 5
    while _alive_with(marker):
        assert time.monotonic() < end, "the jailed process outlived its killed parent"
        time.sleep(0.05)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"),
                    reason="the jail is Linux's")
def test_an_interrupted_wait_leaves_no_jail_running(monkeypatch):
    """An exception while kport waits on a jailed command (Ctrl-C, a case budget) kills the
    jail before it propagates."""
    import random
    import signal
    import time

    from runners.sandbox import Jail

    class Interrupted(Exception):
        pass

    marker = f"130.{random.randrange(10**6, 10**7)}"

    def alarm(signum, frame):
        raise Interrupted()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(Interrupted):
            Jail().run(["sleep", marker], timeout=100)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    end = time.monotonic() + 5
    while _alive_with(marker):
        assert time.monotonic() < end, "the jailed command outlived the interrupted wait"
        time.sleep(0.05)


def _alive_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``."""
    from pathlib import Path

    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_text() and \
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found
