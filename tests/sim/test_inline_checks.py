"""The inline access checks of checked builds (kport/checks.h) at their edges. A buffer access is
settled inline by one compare of its offset (rotated, so that a misaligned one fails it too), a
threadgroup access by records the runtime sets up as each variable is placed, and a kernel
without barriers runs as one work-item loop. At each edge the checks must report what the
runtime reports: nothing for the last element in bounds, and one finding, naming the thread,
for one element past the end, one before the start, a buffer size that is not a multiple of
the access, and bytes past a threadgroup variable's end."""

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from runners import workitems
from runners.cuda_sim import RawKernel
from runners.metal_sim import metal_kernel

REGIONS, FIBERS = workitems.MODE_REGIONS, workitems.MODE_FIBERS
N = 64  # threads, one group: the bad index is met by the first or the last work-item

# Thread i copies x[i] to y[i]; thread `bad` reads x[bad + off] (line 3 of READ) or writes
# y[bad + off] (line 4 of WRITE) instead.
CUDA_READ = r"""extern "C" __global__ void k(const T* x, T* y, int bad, int off) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  T v = i == bad ? x[i + off] : x[i];
  y[i] = v;
}"""
CUDA_WRITE = CUDA_READ.replace("i == bad ? x[i + off] : x[i]", "x[i]").replace(
    "y[i] = v", "y[i == bad ? i + off : i] = v")
METAL_READ = """int i = int(thread_position_in_grid.x);
T v = i == bad ? x[i + off] : x[i];
y[i] = v;"""
METAL_WRITE = METAL_READ.replace("i == bad ? x[i + off] : x[i]", "x[i]").replace(
    "y[i] = v", "y[i == bad ? i + off : i] = v")
CUDA_TYPES = {"char": np.int8, "short": np.int16, "int": np.int32, "long long": np.int64,
              "double": np.float64}
METAL_TYPES = {"char": np.int8, "short": np.int16, "int": np.int32, "long": np.int64,
               "float": np.float32}
# (bad, off): one past the end at the last work-item, one before the start at the first, and
# further past the end (inside the buffer's redzone) from a thread in the middle
EDGES = [(N - 1, 1), (0, -1), (31, 40)]


def _run(dialect, ctype, write, bad, off):
    dtype = (CUDA_TYPES if dialect == "cuda" else METAL_TYPES)[ctype]
    x = (np.arange(N) + 1).astype(dtype)
    if dialect == "cuda":
        code = (CUDA_WRITE if write else CUDA_READ).replace("T", ctype)
        y = np.zeros(N, dtype)
        run = RawKernel(code, "k").launch((1,), (N,), (x, y, np.int32(bad), np.int32(off)))
        return run, x, y
    import mlx.core as mx

    body = (METAL_WRITE if write else METAL_READ).replace("T v", f"{ctype} v")
    run = metal_kernel("edge", ["x", "bad", "off"], ["y"], body).launch(
        inputs=[x, mx.array(bad, dtype=mx.int32), mx.array(off, dtype=mx.int32)],
        output_shapes=[(N,)], output_dtypes=[getattr(mx, np.dtype(dtype).name)],
        grid=(N, 1, 1), threadgroup=(N, 1, 1))
    return run, x, np.array(run.outputs[0]) if run.outputs else None


@pytest.mark.parametrize("dialect, ctype", [("cuda", t) for t in CUDA_TYPES]
                         + [("metal", t) for t in METAL_TYPES])
@pytest.mark.parametrize("write", [False, True])
@pytest.mark.parametrize("bad, off", EDGES)
def test_one_finding_for_an_access_past_either_end_of_a_buffer(dialect, ctype, write, bad,
                                                                off):
    run, x, y = _run(dialect, ctype, write, bad, off)
    assert run.compiled and run.mode == REGIONS, (run.diagnostics, run.mode)
    line = (4 if write else 3) - (dialect == "metal")  # Metal's body has no signature line
    found = [(f.kind, f.line, f.thread, f.count) for f in run.findings]
    assert found == [("out_of_bounds", line, (bad, 0, 0), 1)], run.findings
    name, verb = ("y", "write") if write else ("x", "read")
    assert f"{verb} of buffer '{name}' at element {bad + off} " in run.findings[0].message
    others = np.arange(N) != bad
    np.testing.assert_array_equal(y[others], x[others])


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_the_hooks_are_linked_in_and_inlined_leaving_no_copy(dialect):
    """A checked build compiles the hooks apart and links in only those its accesses call,
    inlined (runners/simbuild.py checks_bitcode): the library holds no hook of its own, where
    each kernel once compiled all twenty, and the finding still comes."""
    run, _, _ = _run(dialect, "int", False, N - 1, 1)
    assert [f.kind for f in run.findings] == ["out_of_bounds"], run.findings
    with open(run.build.library, "rb") as f:  # every symbol, local ones included
        symbols = [s.name for s in ELFFile(f).get_section_by_name(".symtab").iter_symbols()]
    # the int reads and writes' out-of-line halves (__kp_access_rest<4, ...>) and nothing else
    left = [s for s in symbols if s.startswith(("__tsan_read", "__tsan_write",
                                                "__tsan_unaligned", "_ZL16__kp_access"))]
    assert left and all(s.startswith("_ZL16__kp_access_restILj4E") for s in left), left


@pytest.mark.parametrize("dialect, ctype", [("cuda", "double"), ("metal", "long")])
def test_every_element_up_to_the_last_is_no_finding(dialect, ctype):
    run, x, y = _run(dialect, ctype, False, N - 1, 0)  # the bad thread reads x[N - 1]
    assert run.ok and not run.findings, run.findings
    np.testing.assert_array_equal(y, x)


# A 10-byte buffer read as ints: thread 1 reads bytes 4..7, thread 2 bytes 8..11, two of
# them past the end.
SHORT_BUFFER = r"""extern "C" __global__ void k(const unsigned char* b, int* y) {
  const int* w = (const int*)b;
  y[threadIdx.x] = w[threadIdx.x];
}"""


def test_an_int_read_that_runs_past_a_buffer_of_ten_bytes():
    b = np.arange(10, dtype=np.uint8)
    y = np.zeros(3, np.int32)
    run = RawKernel(SHORT_BUFFER, "k").launch((1,), (3,), (b, y))
    assert [(f.kind, f.line, f.thread) for f in run.findings] == [
        ("out_of_bounds", 3, (2, 0, 0))], run.findings
    assert "read of buffer 'b' at element 8 " in run.findings[0].message
    np.testing.assert_array_equal(y[:2], b[:8].view(np.int32))


# Threadgroup variables whose sizes are not multiples of 16 bytes: s (5 floats, 20 bytes) and
# u (3 floats). Threads 0-3 write s[0..3] and 0-2 u[0..2]; after the barrier thread `bad`
# makes the access that `pick` selects (lines 9-13), everyone else reads in bounds.
CUDA_TG = r"""extern "C" __global__ void k(float* out, int bad, int pick) {
  __shared__ float s[5];
  __shared__ float u[3];
  int t = threadIdx.x;
  if (t < 4) s[t] = t;
  if (t < 3) u[t] = t;
  __syncthreads();
  float v = s[t % 4] + u[t % 3];
  if (t == bad && pick == 0) v += s[5];
  if (t == bad && pick == 1) v += u[3];
  if (t == bad && pick == 2) v += s[-1];
  if (t == bad && pick == 3) v += s[4];
  if (t == bad && pick == 4) { float4 q = *(float4*)&u[0]; v += q.x + q.y + q.z + q.w; }
  if (t == bad && pick == 5) s[5] = v;
  out[t] = v;
}"""
TG_FOUND = {0: ("out_of_bounds", 9, "threadgroup variable 's': byte 20 of a 20-byte variable"),
            1: ("out_of_bounds", 10, "threadgroup variable 'u': byte 12 of a 12-byte variable"),
            2: ("out_of_bounds", 11, "before the first threadgroup variable"),
            3: ("uninitialized", 12, "'s' at byte 16 before any thread"),
            4: ("out_of_bounds", 13, "threadgroup variable 'u'"),
            5: ("out_of_bounds", 14, "write of threadgroup variable 's': byte 20 of a 20-byte")}


@pytest.mark.parametrize("work_items, mode", [("auto", REGIONS), ("off", FIBERS)])
@pytest.mark.parametrize("pick", sorted(TG_FOUND))
@pytest.mark.parametrize("bad", [0, N - 1])
@pytest.mark.parametrize("checks", ["full", "bounds"])
def test_threadgroup_accesses_past_a_variable_that_ends_inside_a_16_byte_block(
        monkeypatch, work_items, mode, pick, bad, checks):
    monkeypatch.setenv("KPORT_SIM_WORK_ITEMS", work_items)
    monkeypatch.setenv("KPORT_SIM_CHECKS", checks)
    run = RawKernel(CUDA_TG, "k").launch((2,), (N,), (np.zeros(2 * N, np.float32), np.int32(bad),
                                                      np.int32(pick)))
    assert run.compiled and run.mode == mode, (run.diagnostics, run.mode)
    kind, line, text = TG_FOUND[pick]
    found = [(f.kind, f.line, f.thread, f.count) for f in run.findings]
    if checks == "bounds" and kind != "out_of_bounds":
        assert found == [], run.findings
        return
    assert found == [(kind, line, (bad, 0, 0), 2)], run.findings  # once a group
    assert text in run.findings[0].message, run.findings[0].message


# A read that a write to the same address follows in the same block (`s[t] += 1`): the
# sanitizer leaves it to the write's check unless told to instrument it, and then an
# uninitialised accumulator went unreported (its 0xFF poison made the output wrong, but no
# finding said why). The read side of a device buffer's extents goes through the same check.
CUDA_ACCUMULATE = r"""extern "C" __global__ void k(int* out, int* acc, int n) {
  __shared__ int s[32];
  int t = threadIdx.x;
  s[t] += 1;
  __syncthreads();
  out[t] = s[31 - t];
  acc[t + n] += 1;
}"""


@pytest.mark.parametrize("work_items, mode", [("auto", REGIONS), ("off", FIBERS)])
def test_a_read_modify_write_of_unwritten_threadgroup_memory_is_reported(
        monkeypatch, work_items, mode):
    monkeypatch.setenv("KPORT_SIM_WORK_ITEMS", work_items)
    monkeypatch.setenv("KPORT_SIM_CHECKS", "full")
    out, acc = np.zeros(32, np.int32), np.zeros(32, np.int32)
    run = RawKernel(CUDA_ACCUMULATE, "k").launch((1,), (32,), (out, acc, np.int32(0)))
    assert run.compiled and run.mode == mode, (run.diagnostics, run.mode)
    assert [(f.kind, f.line) for f in run.findings] == [("uninitialized", 4)], run.findings
    run = RawKernel(CUDA_ACCUMULATE, "k").launch((1,), (32,), (out, acc, np.int32(1)))
    assert ("out_of_bounds", 7, (31, 0, 0)) in [(f.kind, f.line, f.thread)
                                               for f in run.findings], run.findings


# Why it matters: an AND-accumulator left unset reads the all-ones poison, so `s[t] &= x[t]`
# gives x[t] here, as if it had been set to ~0, while a GPU's leftover threadgroup memory clears
# bits. The output is right; only the finding tells, and only with read-before-write reads
# instrumented.
CUDA_AND_ACCUMULATOR = r"""extern "C" __global__ void k(const int* x, int* out) {
  __shared__ int m[32];
  int t = threadIdx.x;
  m[t] &= x[t];
  __syncthreads();
  out[t] = m[t];
}"""


def test_an_unset_and_accumulator_is_reported_though_its_output_is_right(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_CHECKS", "full")
    x, out = np.arange(32, dtype=np.int32), np.zeros(32, np.int32)
    run = RawKernel(CUDA_AND_ACCUMULATOR, "k").launch((1,), (32,), (x, out))
    np.testing.assert_array_equal(out, x)  # the poison does not show in the output
    assert [(f.kind, f.line) for f in run.findings] == [("uninitialized", 4)], run.findings
