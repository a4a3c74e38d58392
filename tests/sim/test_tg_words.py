"""Threadgroup-memory checks keep one record per 4-byte word and switch a word to records per
byte when it is accessed in parts: whole words, bytes of one word, and words that change from
one to the other must report every race, uninitialised read and overrun, and nothing else, in
a thread loop, in work-item loops and in fibers."""

import numpy as np
import pytest

from runners.cuda_sim import RawKernel


def _launch(source, entry, threads=64, groups=1, out=None):
    out = np.zeros(threads * groups, np.int32) if out is None else out
    run = RawKernel(source, entry).launch((groups,), (threads,), (out,))
    assert run.compiled, run.diagnostics
    return run, out


def _kinds(run):
    return {(f.kind, f.line) for f in run.findings}


# Each thread writes its own byte (four threads share a word), then reads another thread's.
BYTES = r"""extern "C" __global__ void k(int* out) {
  __shared__ unsigned char b[64];
  __shared__ short h[64];
  int t = threadIdx.x;
  b[t] = (unsigned char)t; h[t] = (short)(3 * t);
  __syncthreads();
  out[t] = b[63 - t] + h[t ^ 1];
}"""


def test_threads_writing_neighbouring_bytes_of_one_word_do_not_race():
    run, out = _launch(BYTES, "k")
    assert run.ok and not run.findings, run.findings
    t = np.arange(64)
    np.testing.assert_array_equal(out, (63 - t) + 3 * (t ^ 1))


# Two threads write the same byte: threads 2k and 2k+1 both store b[k].
SAME_BYTE = r"""extern "C" __global__ void k(int* out) {
  __shared__ unsigned char b[64];
  int t = threadIdx.x;
  b[t / 2] = (unsigned char)t;
  __syncthreads();
  out[t] = b[t / 2];
}"""


def test_two_threads_writing_one_byte_race():
    run, _ = _launch(SAME_BYTE, "k")
    assert _kinds(run) == {("race", 4)}, run.findings


# Line 5: thread 0 reads the word w[0] whole; line 6: thread 1 then writes one of its bytes.
# Line 7 and 8 the other way round on w[1]: a byte written, then the word read by another thread.
WORD_THEN_BYTE = r"""extern "C" __global__ void k(int* out) {
  __shared__ int w[64];
  int t = threadIdx.x;
  w[t] = t; __syncthreads();
  if (t == 0) out[0] = w[0];
  if (t == 1) ((unsigned char*)w)[2] = 7;
  if (t == 2) ((unsigned char*)w)[4 + 3] = 9;
  if (t == 3) out[3] = w[1];
  __syncthreads();
}"""


def test_a_byte_written_races_with_the_whole_word_read_by_another_thread():
    run, _ = _launch(WORD_THEN_BYTE, "k")
    races = {f.line: f.message for f in run.findings if f.kind == "race"}
    assert set(races) == {6, 8}, run.findings
    assert "byte 2" in races[6] and "byte 7" in races[8], races
    assert {f.kind for f in run.findings} == {"race"}, run.findings


# Thread 0 writes byte 1 of w[0] only; after the barrier every thread reads w[0] whole.
PART_WRITTEN = r"""extern "C" __global__ void k(int* out) {
  __shared__ int w[4];
  int t = threadIdx.x;
  if (t == 0) ((unsigned char*)w)[1] = 5;
  __syncthreads();
  out[t] = w[0] & 0xFF00;
}"""


def test_reading_a_word_of_which_one_byte_was_written_is_uninitialised():
    run, _ = _launch(PART_WRITTEN, "k")
    assert _kinds(run) == {("uninitialized", 6)}, run.findings
    assert all("byte 0" in f.message for f in run.findings), run.findings


# One byte of a partly written word: byte 1 was written, byte 2 was not.
ONE_BYTE = r"""extern "C" __global__ void k(int* out) {
  __shared__ unsigned char b[8];
  int t = threadIdx.x;
  if (t == 0) b[1] = 5;
  __syncthreads();
  out[t] = b[1];
  if (t == 9) out[t] = b[2];
}"""


def test_an_unwritten_byte_of_a_partly_written_word_is_uninitialised():
    run, out = _launch(ONE_BYTE, "k")
    found = [f for f in run.findings if f.kind == "uninitialized"]
    assert _kinds(run) == {("uninitialized", 7)} and found[0].thread == (9, 0, 0), run.findings
    assert "byte 2" in found[0].message, found
    assert out[0] == 5


# Group 0 writes w[0] a byte at a time (its word gets byte records); group 1 writes nothing and
# reads it whole: uninitialised in groups 1 and 2 only, although the same worker ran group 0.
GROUPS = r"""extern "C" __global__ void k(int* out) {
  __shared__ int w[4];
  int t = threadIdx.x;
  if (blockIdx.x == 0 && t < 4) ((unsigned char*)w)[t] = 1;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = w[0];
}"""


def test_a_word_read_in_parts_in_one_group_is_checked_afresh_in_the_next(monkeypatch):
    monkeypatch.setenv("KPORT_SIM_THREADS", "1")
    run, out = _launch(GROUPS, "k", groups=3)
    assert _kinds(run) == {("uninitialized", 6)}, run.findings
    assert {f.group for f in run.findings} <= {(1, 0, 0), (2, 0, 0)}, run.findings
    np.testing.assert_array_equal(out[:64], 0x01010101)


# An 8-byte read starting inside a 5-int variable and ending past it (line 5).
STRADDLE = r"""extern "C" __global__ void k(int* out) {
  __shared__ int s[5];
  int t = threadIdx.x;
  if (t < 5) s[t] = t; __syncthreads();
  if (t == 0) { long long v = reinterpret_cast<long long*>(s)[2]; out[0] = (int)(v ^ (v >> 32)); }
  out[t] = s[t % 5];
}"""


def test_an_access_running_past_the_end_of_a_variable_is_out_of_bounds():
    run, _ = _launch(STRADDLE, "k")
    oob = [f for f in run.findings if f.kind == "out_of_bounds"]
    assert _kinds(run) == {("out_of_bounds", 5)}, run.findings
    assert "'s'" in oob[0].message and "byte 20 of a 20-byte" in oob[0].message, oob


# Whole words in work-item loops and fibers (threads run in order between barriers): line 5
# reads a word written before a barrier (no race); at line 7 thread t reads w[t - 1], which
# thread t - 1 wrote at line 6 with no barrier between, and threads 0-62 read w[63] before
# thread 63 writes it at line 6 ("several threads").
WORDS = r"""extern "C" __global__ void k(int* out) {
  __shared__ int w[64];
  int t = threadIdx.x;
  w[t] = t; __syncthreads();
  out[t] = w[(t + 1) % 64];
  __syncthreads(); w[t] = 2 * t; SYNC
  out[t] += w[(t + 63) % 64] + w[63];
  __syncthreads();
}"""


@pytest.mark.parametrize("sync, mode", [
    ("", "work-item loops"),
    ("if (t == 99) __syncwarp();", "fibers"),
])
def test_whole_word_races_in_each_mode(sync, mode):
    run, _ = _launch(WORDS.replace("SYNC", sync), "k")
    assert run.mode == mode, run.mode
    assert _kinds(run) == {("race", 6), ("race", 7)}, run.findings
    at6 = [f.message for f in run.findings if f.line == 6]
    assert len(at6) == 1 and "several threads and written by thread 63" in at6[0], at6


# Lanes of one warp: lane 0's write is ordered before lane 1's read by the __syncwarp (line
# 6: no race); lane 1's write at line 7 is not ordered before lane 2's read (line 8: a race).
WARP = r"""extern "C" __global__ void k(int* out) {
  __shared__ int w[32];
  int t = threadIdx.x;
  if (t == 0) w[0] = 1;
  __syncwarp();
  if (t == 1) out[1] = w[0];
  if (t == 1) w[1] = 3;
  if (t == 2) out[2] = w[1];
}"""


def test_a_warp_sync_orders_whole_word_accesses_of_its_lanes():
    run, _ = _launch(WARP, "k", threads=32)
    assert run.mode == "fibers", run.mode
    assert _kinds(run) == {("race", 8)}, run.findings


# Lane 1 reads w[0] before and after a __syncwarp (lines 5 and 7); lane 2's write at line 8
# is ordered after the first read only: a race with the second.
REREAD = r"""extern "C" __global__ void k(int* out) {
  __shared__ int w[32];
  int t = threadIdx.x;
  w[t] = t; __syncthreads();
  if (t == 1) out[1] = w[0];
  __syncwarp();
  if (t == 1) out[2] = w[0];
  if (t == 2) w[0] = 5;
}"""


def test_a_read_again_after_a_warp_sync_still_races_with_a_later_write():
    run, _ = _launch(REREAD, "k", threads=32)
    assert run.mode == "fibers", run.mode
    assert _kinds(run) == {("race", 8)}, run.findings
    assert "read by thread 1 and written by thread 2" in run.findings[0].message


@pytest.mark.parametrize("checks", ["full", "race", "uninit", "bounds"])
def test_no_finding_for_a_correct_kernel_in_any_mode(monkeypatch, checks):
    monkeypatch.setenv("KPORT_SIM_CHECKS", checks)
    run, _ = _launch(BYTES, "k")
    assert run.ok and not run.findings, run.findings


# Metal: a `half` a thread, two to a word. With `t / 2` threads 2k and 2k+1 write one half
# (line 3) and h[16..31] stay unwritten (line 5).
HALVES = """threadgroup half h[32];
uint t = thread_position_in_threadgroup.x;
h[INDEX] = half(x[t]);
threadgroup_barrier(mem_flags::mem_threadgroup);
y[t] = float(h[t ^ 1]);"""


@pytest.mark.parametrize("index, found", [
    ("t", set()), ("t / 2", {("race", 3), ("uninitialized", 5)})])
def test_metal_halves_sharing_a_word(index, found):
    import mlx.core as mx

    from runners.metal_sim import metal_kernel

    x = np.arange(32, dtype=np.float32)
    k = metal_kernel("halves", ["x"], ["y"], HALVES.replace("INDEX", index))
    run = k.launch(inputs=[x], output_shapes=[(32,)], output_dtypes=[mx.float32],
                   grid=(32, 1, 1), threadgroup=(32, 1, 1))
    assert _kinds(run) == found, run.findings
    if not found:
        np.testing.assert_array_equal(np.array(run.outputs[0]), x.astype(np.int64) ^ 1)


# Threads 1 and 2 read s[0] (two readers: further reads of the word are settled at once), then
# thread 3 writes it, whole or one byte of it, and thread 4 reads it: both the write and the
# last read race, and each is reported at its own line.
SHARED_THEN_WRITTEN = r"""extern "C" __global__ void k(int* out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = t;
  __syncthreads();
  int v = 0;
  if (t == 1 || t == 2 || t == 4) v = s[0];
  if (t == 3) WRITE;
  out[t] = v;
}"""


@pytest.mark.parametrize("write", ["s[0] = 5", "((unsigned char*)s)[1] = 5"])
@pytest.mark.parametrize("work_items", ["auto", "off"])
def test_a_write_after_many_reads_makes_the_next_read_race(monkeypatch, write, work_items):
    monkeypatch.setenv("KPORT_SIM_WORK_ITEMS", work_items)  # off: fibers
    run, _ = _launch(SHARED_THEN_WRITTEN.replace("WRITE", write), "k", threads=8)
    races = {line for kind, line in _kinds(run) if kind == "race"}
    assert {7, 8} <= races, run.findings
