"""Work-item loops (runners/workitems.py): kernels whose barriers every thread provably reaches
run their barrier-free regions as loops over the group's threads; the rest keep fibers. The
launch record's ``mode`` says which ran."""

import numpy as np
import pytest

from runners import workitems
from runners.cuda_sim import RawKernel
from runners.metal_sim import metal_kernel

REGIONS, FIBERS, LOOP = workitems.MODE_REGIONS, workitems.MODE_FIBERS, workitems.MODE_LOOP


def _cuda(code, grid, block, *args):
    return RawKernel(code, "k").launch(grid, block, args)


def _metal(source, inputs, n_out, grid, tg, names=("x",)):
    import mlx.core as mx

    k = metal_kernel("wi", list(names), ["y"], source)
    return k.launch(inputs=inputs, output_shapes=[(n_out,)], output_dtypes=[mx.float32],
                    grid=grid, threadgroup=tg)


# Locals of several kinds live across barriers; a uniform loop holds two barriers (a scan);
# a const pointer, an array with an initializer and a uniform local take part.
CUDA_LIVE = r"""extern "C" __global__ void k(const float* x, float* y, int n) {
  __shared__ float s[64];
  const int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  const float* row = x + base;
  float mine = row[t] * 2.0f, keep[3] = {1.0f, 2.0f, 3.0f};
  const int half = n / 2;
  s[t] = mine;
  __syncthreads();
  float other = s[blockDim.x - 1 - t];
  __syncthreads();
  for (int off = 1; off < blockDim.x; off <<= 1) {
    float v = t >= off ? s[t - off] : 0.0f;
    __syncthreads();
    s[t] += v;
    __syncthreads();
  }
  if (half > 0) { keep[1] += 1.0f; __syncthreads(); }
  y[base + t] = s[t] + other * 1000.0f + keep[1] * 100000.0f + mine * 0.0f;
}"""


def _scan_want(x, block):
    rows = (2 * x).reshape(-1, block)
    return (np.cumsum(rows, axis=1) + rows[:, ::-1] * 1000 + 300000).reshape(-1)


def test_cuda_locals_live_across_barriers_and_a_uniform_loop():
    x = np.arange(128, dtype=np.float32) / 7
    y = np.zeros(128, np.float32)
    run = _cuda(CUDA_LIVE, (2,), (64,), x, y, np.int32(8))
    assert run.ok and not run.findings, run.findings or run.diagnostics
    assert run.mode == REGIONS
    np.testing.assert_allclose(y, _scan_want(x, 64), rtol=1e-5)


METAL_LIVE = """threadgroup float s[64];
uint t = thread_position_in_threadgroup.x;
uint lane = thread_index_in_simdgroup, simd = simdgroup_index_in_threadgroup;
float mine = x[thread_position_in_grid.x] * 2.0f, keep[3] = {1.0f, 2.0f, 3.0f};
s[t] = mine;
threadgroup_barrier(mem_flags::mem_threadgroup);
float other = s[threads_per_threadgroup.x - 1 - t];
threadgroup_barrier(mem_flags::mem_threadgroup);
for (uint off = 1; off < threads_per_threadgroup.x; off <<= 1) {
  float v = t >= off ? s[t - off] : 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  s[t] += v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (threadgroup_position_in_grid.x < 100) {
  keep[1] += 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
y[thread_position_in_grid.x] = s[t] + other * 1000.0f + keep[1] * 100000.0f
    + float(lane + 32 * simd - t);"""


def test_metal_locals_live_across_barriers_and_a_uniform_loop():
    x = np.arange(128, dtype=np.float32) / 7
    run = _metal(METAL_LIVE, [x], 128, (128, 1, 1), (64, 1, 1))
    assert run.ok and not run.findings, run.findings or run.diagnostics
    assert run.mode == REGIONS
    np.testing.assert_allclose(np.array(run.outputs[0]), _scan_want(x, 64), rtol=1e-5)


def test_cuda_two_dimensional_block_in_work_item_loops():
    code = r"""extern "C" __global__ void k(const float* a, float* y) {
  __shared__ float tile[8][4];
  int r = threadIdx.y, c = threadIdx.x;
  tile[r][c] = a[r * 4 + c];
  __syncthreads();
  y[c * 8 + r] = tile[r][c];
}"""
    a = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    run = _cuda(code, (1,), (4, 8), a, y)
    assert run.ok and not run.findings and run.mode == REGIONS
    np.testing.assert_array_equal(y, a.reshape(8, 4).T.reshape(-1))


RETURN_BEFORE = r"""extern "C" __global__ void k(const float* x, float* y) {
  __shared__ float s[16];
  int t = threadIdx.x;
  if (t >= 8) return;
  s[t] = x[t];
  __syncthreads();
  y[t] = s[7 - t];
}"""


def test_cuda_return_before_a_barrier_is_divergence_in_work_item_loops():
    y = np.zeros(16, np.float32)
    run = _cuda(RETURN_BEFORE, (1,), (16,), np.arange(16, dtype=np.float32), y)
    assert run.mode == REGIONS
    div = [f for f in run.findings if f.kind == "divergence"]
    assert div and div[0].line == 6 and "8 of 16 threads" in div[0].message, run.findings
    # the barrier still releases the threads left, as with fibers (and on an H200)
    np.testing.assert_array_equal(y[:8], np.arange(8)[::-1])


def test_metal_return_before_a_barrier_is_divergence_in_work_item_loops():
    src = """threadgroup float s[16];
uint t = thread_position_in_threadgroup.x;
if (t >= 8) return;
s[t] = x[t];
threadgroup_barrier(mem_flags::mem_threadgroup);
y[t] = s[7 - t];"""
    run = _metal(src, [np.arange(16, dtype=np.float32)], 16, (16, 1, 1), (16, 1, 1))
    assert run.mode == REGIONS
    div = [f for f in run.findings if f.kind == "divergence"]
    assert div and div[0].line == 5 and "8 of 16 threads" in div[0].message, run.findings


@pytest.mark.parametrize("where", ["in a region", "in a loop"])
def test_cuda_return_after_the_last_barrier_skips_the_rest(where):
    exit_ = ("if (t % 2) return;" if where == "in a region"
             else "for (int i = 0; i < 4; i++) { if (t % 2 && i == 1) return; }")
    code = r"""extern "C" __global__ void k(const float* x, float* y) {
  __shared__ float s[16];
  int t = threadIdx.x;
  s[t] = x[t];
  __syncthreads();
  EXIT
  y[t] = s[15 - t];
}""".replace("EXIT", exit_)
    y = np.full(16, -1, np.float32)
    run = _cuda(code, (1,), (16,), np.arange(16, dtype=np.float32), y)
    assert run.ok and not run.findings and run.mode == REGIONS
    want = np.where(np.arange(16) % 2, -1, 15 - np.arange(16))
    np.testing.assert_array_equal(y, want)


def test_metal_return_after_the_last_barrier_skips_the_rest():
    src = """threadgroup float s[16];
uint t = thread_position_in_threadgroup.x;
s[t] = x[t];
threadgroup_barrier(mem_flags::mem_threadgroup);
if (t % 2) return;
y[t] = s[15 - t];"""
    import mlx.core as mx

    k = metal_kernel("wiret", ["x"], ["y"], src)
    run = k.launch(inputs=[np.arange(16, dtype=np.float32)], output_shapes=[(16,)],
                   output_dtypes=[mx.float32], grid=(16, 1, 1), threadgroup=(16, 1, 1),
                   init_value=-1)
    assert run.ok and not run.findings and run.mode == REGIONS
    want = np.where(np.arange(16) % 2, -1, 15 - np.arange(16))
    np.testing.assert_array_equal(np.array(run.outputs[0]), want)


def test_cuda_non_uniform_barrier_keeps_fibers_and_is_reported():
    code = r"""extern "C" __global__ void k(float* y) {
  if (threadIdx.x < 16) { __syncthreads(); }
  y[threadIdx.x] = 1.0f;
}"""
    run = _cuda(code, (1,), (32,), np.zeros(32, np.float32))
    assert run.mode == FIBERS
    assert run.findings and run.findings[0].kind == "divergence" and run.findings[0].line == 2


def test_metal_non_uniform_loop_barrier_keeps_fibers_and_is_reported():
    src = """uint t = thread_position_in_threadgroup.x;
for (uint i = 0; i < t; i++) threadgroup_barrier(mem_flags::mem_none);
y[t] = x[t];"""
    run = _metal(src, [np.arange(16, dtype=np.float32)], 16, (16, 1, 1), (16, 1, 1))
    assert run.mode == FIBERS
    assert "divergence" in {f.kind for f in run.findings}


@pytest.mark.parametrize("second", [
    "s[threadIdx.x] += 1.0f;\n  y[threadIdx.x] = s[31 - threadIdx.x];",  # a race
    "y[threadIdx.x] = s[(threadIdx.x + 1) % 32];\n  s[0] = 1.0f;",  # a race
    "y[threadIdx.x] = s[threadIdx.x + 1];\n  y[0] = 0.0f;",  # out of bounds
])
def test_checks_find_the_same_as_with_fibers(monkeypatch, second):
    # work-item loops run the threads in the order the fiber scheduler does, so the race,
    # bounds and uninitialised-read checks see the same accesses by the same threads
    code = r"""extern "C" __global__ void k(const float* x, float* y) {
  __shared__ float s[32];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  SECOND
}""".replace("SECOND", second)
    monkeypatch.setenv("KPORT_SIM_CHECKS", "full")
    found = {}
    for setting in ("auto", "off"):
        monkeypatch.setenv("KPORT_SIM_WORK_ITEMS", setting)
        run = _cuda(code, (1,), (32,), np.zeros(32, np.float32), np.zeros(32, np.float32))
        found[run.mode] = [(f.kind, f.line, f.thread, f.message, f.count) for f in run.findings]
    assert set(found) == {REGIONS, FIBERS}
    assert found[REGIONS] and found[REGIONS] == found[FIBERS]


def test_collectives_and_plain_kernels_keep_their_modes():
    shfl = r"""extern "C" __global__ void k(float* y) {
  float v = __shfl_down_sync(0xffffffffu, (float)threadIdx.x, 1);
  __syncthreads();
  y[threadIdx.x] = v;
}"""
    run = _cuda(shfl, (1,), (32,), np.zeros(32, np.float32))
    assert run.ok and run.mode == FIBERS
    plain = r"""extern "C" __global__ void k(float* y) { y[threadIdx.x] = 2.0f; }"""
    # without barriers: one work-item loop; the plain thread loop where that is not formed
    assert _cuda(plain, (1,), (32,), np.zeros(32, np.float32)).mode == REGIONS
    changes = plain.replace("float* y) {", "float* y) { y += 0;")
    assert _cuda(changes, (1,), (32,), np.zeros(32, np.float32)).mode == LOOP


def test_a_region_build_that_does_not_compile_falls_back_to_fibers():
    # the per-thread array's type is a typedef of the body: the hoisted declaration at the top
    # of the kernel cannot name it, so the region build fails and fibers run the kernel
    code = r"""extern "C" __global__ void k(const float* x, float* y) {
  typedef float F;
  F v = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = v + 1.0f;
}"""
    y = np.zeros(8, np.float32)
    run = _cuda(code, (1,), (8,), np.arange(8, dtype=np.float32), y)
    assert run.ok and not run.findings and run.mode == FIBERS
    np.testing.assert_array_equal(y, np.arange(8) + 1)


def _why(body: str, params: str = "const float* x, float* y, int n") -> str:
    code = f'extern "C" __global__ void k({params}) {{\n{body}\n}}'
    with pytest.raises(workitems.NotFormed) as err:
        workitems.form_regions(code, "k", language="cuda", barrier="__syncthreads",
                               uniform={"blockIdx", "blockDim", "gridDim"}, varying={})
    return str(err.value)


@pytest.mark.parametrize("body, says", [
    ("for (int i = 0; i < threadIdx.x; i++) __syncthreads();", "condition not provably"),
    ("for (int i = 0; i < n; i++) { if (x[i] > 0) break; __syncthreads(); }", "break"),
    ("for (int i = 0; i < n; i++) { if (n > 2) { if (x[i] > 0) continue; __syncthreads(); } }",
     "continue"),
    ("for (int i = 0; i < n; i++) { i += 1; __syncthreads(); }", "changes its counter"),
    ("if (x[0] > 0) { __syncthreads(); }", "not provably uniform"),
    ("n = 2; if (n > 0) { __syncthreads(); }", "changes its parameter"),
    ("int m = n; m++; if (m > 0) { __syncthreads(); }", "not provably uniform"),
    ("while (n > 0) { __syncthreads(); }", "while"),
    ("int t = threadIdx.x; if (t) goto out; __syncthreads(); out: y[t] = 1;", "goto"),
    ("auto v = x[threadIdx.x]; __syncthreads(); y[0] = v;", "auto"),
])
def test_kernels_that_keep_fibers_say_why(body, says):
    assert says in _why(body)


@pytest.mark.parametrize("body, says", [
    ("x += blockIdx.x; __syncthreads(); y[0] = x[0];", "changes its parameter `x`"),
    ("bump(n); __syncthreads();", "changes its parameter `n`"),
    ("float a[2] = {0, 1}; float* p = a; __syncthreads(); y[0] = p[0];", "pointer `p`"),
    ("for (int i = 0; i < n; i++) { bump(i); __syncthreads(); }", "changes its counter"),
])
def test_state_one_copy_cannot_hold_keeps_fibers(body, says):
    code = ('__device__ void bump(int& v) { v++; }\n'
            f'extern "C" __global__ void k(const float* x, float* y, int n) {{\n{body}\n}}')
    with pytest.raises(workitems.NotFormed) as err:
        workitems.form_regions(code, "k", language="cuda", barrier="__syncthreads",
                               uniform={"blockIdx", "blockDim", "gridDim"}, varying={})
    assert says in str(err.value)


def test_a_kernel_that_moves_its_pointer_parameters_still_runs_right():
    code = r"""extern "C" __global__ void k(const float* x, float* y) {
  __shared__ float s[8];
  x += blockIdx.x * 8;
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[blockIdx.x * 8 + threadIdx.x] = s[7 - threadIdx.x];
}"""
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    run = _cuda(code, (2,), (8,), x, y)
    assert run.ok and not run.findings and run.mode == FIBERS
    np.testing.assert_array_equal(y, x.reshape(2, 8)[:, ::-1].reshape(-1))


def test_a_pointer_into_shared_memory_indexed_by_a_local_is_formed():
    code = r"""extern "C" __global__ void k(const float* x, float* y) {
  __shared__ float s[8];
  int t = threadIdx.x;
  float* mine = s + t;
  *mine = x[t];
  __syncthreads();
  y[t] = s[7 - t] + *mine * 0.0f;
}"""
    y = np.zeros(8, np.float32)
    run = _cuda(code, (1,), (8,), np.arange(8, dtype=np.float32), y)
    assert run.ok and not run.findings and run.mode == REGIONS
    np.testing.assert_array_equal(y, np.arange(8)[::-1])


def test_a_reference_local_inside_one_region_is_formed():
    code = r"""extern "C" __global__ void k(const float* x, float* y) {
  __shared__ float s[8];
  float& mine = s[threadIdx.x];
  mine = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = s[7 - threadIdx.x];
}"""
    y = np.zeros(8, np.float32)
    run = _cuda(code, (1,), (8,), np.arange(8, dtype=np.float32), y)
    assert run.ok and not run.findings and run.mode == REGIONS
    np.testing.assert_array_equal(y, np.arange(8)[::-1])
    assert "reference" in _why("float& r = y[0]; __syncthreads(); r = 1;")


# Thread (5, 2) of group 1 reads 1024 floats past the end of `x`: in fast mode that faults in
# the buffer's guard region, in full mode the bounds check reports it; either way the finding
# names that thread, in work-item loops (one store of the index a work-item; without
# barriers, one such loop) and in the plain thread loop (work-item loops off), in both
# dialects.
CUDA_BAD_READ = r"""extern "C" __global__ void k(const float* x, float* y, int n) {
  __shared__ float s[64];
  int t = threadIdx.y * 16 + threadIdx.x;
  s[t] = x[t];
  __syncthreads();
  float v = s[63 - t];
  if (blockIdx.x == 1 && threadIdx.x == 5 && threadIdx.y == 2) v += x[n + 1024];
  y[blockIdx.x * 64 + t] = v;
}"""
METAL_BAD_READ = """threadgroup float s[64];
uint2 l = thread_position_in_threadgroup.xy;
uint t = l.y * 16 + l.x;
s[t] = x[t];
threadgroup_barrier(mem_flags::mem_threadgroup);
float v = s[63 - t];
if (threadgroup_position_in_grid.x == 1 && l.x == 5 && l.y == 2) v += x[n + 1024];
y[threadgroup_position_in_grid.x * 64 + t] = v;"""


def _no_barrier(code: str) -> str:
    return "\n".join(line for line in code.split("\n")
                     if "barrier" not in line and "__syncthreads" not in line)


@pytest.mark.parametrize("checks", ["fast", "full"])
@pytest.mark.parametrize("dialect", ["cuda", "metal"])
@pytest.mark.parametrize("barrier, work_items, mode", [
    (True, "auto", REGIONS), (False, "auto", REGIONS), (False, "off", LOOP)])
def test_a_bad_access_names_its_thread(monkeypatch, checks, dialect, barrier, work_items,
                                       mode):
    import mlx.core as mx

    monkeypatch.setenv("KPORT_SIM_CHECKS", checks)
    monkeypatch.setenv("KPORT_SIM_WORK_ITEMS", work_items)
    x = np.arange(64, dtype=np.float32)
    if dialect == "cuda":
        code = CUDA_BAD_READ if barrier else _no_barrier(CUDA_BAD_READ)
        run = _cuda(code, (2,), (16, 4), x, np.zeros(128, np.float32), np.int32(64))
    else:
        src = METAL_BAD_READ if barrier else _no_barrier(METAL_BAD_READ)
        run = metal_kernel("wibad", ["x", "n"], ["y"], src).launch(
            inputs=[x, mx.array(64, dtype=mx.int32)], output_shapes=[(128,)],
            output_dtypes=[mx.float32], grid=(32, 4, 1), threadgroup=(16, 4, 1))
    assert run.mode == mode
    bad = [f for f in run.findings if f.kind == "out_of_bounds"]
    assert bad and "'x'" in bad[0].message, run.findings
    assert (bad[0].thread, bad[0].group) == ((5, 2, 0), (1, 0, 0)), bad[0]


def test_divergence_names_the_first_thread_left_as_fibers_do(monkeypatch):
    code = RETURN_BEFORE.replace("if (t >= 8) return;", "if (t < 5) return;")
    found = {}
    for setting in ("auto", "off"):
        monkeypatch.setenv("KPORT_SIM_WORK_ITEMS", setting)
        run = _cuda(code, (1,), (16,), np.arange(16, dtype=np.float32),
                    np.zeros(16, np.float32))
        found[run.mode] = [(f.kind, f.line, f.thread, f.message) for f in run.findings]
    assert set(found) == {REGIONS, FIBERS}
    assert found[REGIONS] == found[FIBERS] and found[REGIONS][0][2] == (5, 0, 0), found


# A local computed from the thread's position is declared again in later regions, not kept
# in an array; not when a name it reads is declared twice (a later region could see the
# other one) or changes.
@pytest.mark.parametrize("body, want", [
    ("int w = threadIdx.x + a;\n  s[threadIdx.x] = 1.0f;\n  __syncthreads();\n"
     "  { int a = 100; y[threadIdx.x] = w + a + s[0]; }", lambda t, a: t + a + 101),
    ("int t = threadIdx.x; int u = t * 2;\n  s[t] = 1.0f;\n  __syncthreads();\n  t += 1;\n"
     "  __syncthreads();\n  y[threadIdx.x] = u + t + s[0];", lambda t, a: 3 * t + 2),
    ("const int t = threadIdx.x, u = t * a;\n  s[t] = 1.0f;\n  __syncthreads();\n"
     "  y[t] = u + s[31 - t];", lambda t, a: t * a + 1),
])
def test_locals_from_the_thread_position_keep_their_values(body, want):
    code = (r"""extern "C" __global__ void k(float* y, int a) {
  __shared__ float s[32];
  BODY
}""").replace("BODY", body)
    y = np.zeros(32, np.float32)
    run = _cuda(code, (1,), (32,), y, np.int32(7))
    assert run.ok and not run.findings and run.mode == REGIONS, run.findings or run.diagnostics
    np.testing.assert_array_equal(y, want(np.arange(32), 7))


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
@pytest.mark.parametrize("work_items, mode", [("auto", REGIONS), ("off", LOOP)])
def test_a_crash_in_a_loop_the_compiler_could_vectorise_names_its_thread(monkeypatch, dialect,
                                                                         work_items, mode):
    # `x` ends at a guard page: thread 37 is the first to read past it (x[64]). A loop over
    # the threads vectorised by the compiler would fault for threads 36..39 at once, so the
    # index each thread stores must stay, one store a thread (work-item loop or plain loop).
    import mlx.core as mx

    monkeypatch.setenv("KPORT_SIM_CHECKS", "fast")
    monkeypatch.setenv("KPORT_SIM_WORK_ITEMS", work_items)
    x = np.arange(64, dtype=np.float32)
    if dialect == "cuda":
        code = r"""extern "C" __global__ void k(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = x[i + 27] * 2.0f; }"""
        run = _cuda(code, (1,), (64,), x, np.zeros(64, np.float32))
    else:
        run = metal_kernel("wivec", ["x"], ["y"], "uint i = thread_position_in_grid.x;\n"
                           "y[i] = x[i + 27] * 2.0f;").launch(
            inputs=[x], output_shapes=[(64,)], output_dtypes=[mx.float32], grid=(64, 1, 1),
            threadgroup=(64, 1, 1))
    assert run.mode == mode
    bad = [f for f in run.findings if f.kind == "out_of_bounds"]
    assert bad and "'x'" in bad[0].message and bad[0].thread == (37, 0, 0), run.findings


def test_a_device_function_reading_threadidx_in_a_region_sees_its_thread():
    # regions store only the item's index: threadIdx outside the kernel body derives the rest
    code = r"""__device__ int flat() { return threadIdx.y * 8 + threadIdx.x; }
extern "C" __global__ void k(float* y) {
  __shared__ float s[32];
  s[flat()] = (float)flat();
  __syncthreads();
  y[blockIdx.x * 32 + flat()] = s[31 - flat()];
}"""
    y = np.zeros(64, np.float32)
    run = _cuda(code, (2,), (8, 4), y)
    assert run.ok and not run.findings and run.mode == REGIONS, run.findings or run.diagnostics
    np.testing.assert_array_equal(y, np.tile(31 - np.arange(32), 2))


@pytest.mark.parametrize("decl, array", [
    ("int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;", False),  # declared again
    ("int t = threadIdx.x, i = (int)x[t];", True),  # reads memory: kept in an array
    ("int t = threadIdx.x, i = t; i += 1;", True),  # changes: kept in an array
])
def test_which_locals_are_declared_again_rather_than_kept(decl, array):
    code = r"""extern "C" __global__ void k(const float* x, float* y) {
  __shared__ float s[64];
  DECL
  s[t] = (float)i;
  __syncthreads();
  y[i] = s[63 - t];
}""".replace("DECL", decl)
    from runners import srcrewrite  # lazy: only this test reads the rewrite itself

    code = srcrewrite.rewrite_group_storage(code, "__shared__")  # as cuda_sim does first
    formed = workitems.form_regions(code, "k", language="cuda", barrier="__syncthreads",
                                    uniform={"blockIdx", "blockDim"}, varying={},
                                    per_thread=frozenset({"threadIdx"}))
    assert ("__kp_wi_alloc" in formed) == array, formed
