"""A parameters struct whose fields point at the arrays (issue 15: causal-conv1d's
ConvParamsBase, mamba's SSMParamsBase, FlashAttention's Flash_fwd_params). The oracle runs
the original kernel with the arrays' addresses written into the struct (cuda_sim), the port
takes each pointer field the kernel reads as a buffer of its own, and the package's run()
takes the struct as a dict whose pointer fields are arrays."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import runners
from agent.translate import translate_kernel
from runners import structs
from tests.cli import kport, load_package

SRC = textwrap.dedent("""\
    #include <cstdint>
    template <int kThreads_, typename input_t_>
    struct Traits {
        using input_t = input_t_;
        static constexpr int kThreads = kThreads_;
    };
    struct ScaleParams {
        using index_t = uint32_t;
        int n;
        float scale;
        void *__restrict__ x_ptr;
        void *__restrict__ y_ptr;
        const int32_t *gather;  // optional: y[i] = x[gather[i]]
        void *unused_ptr;
        index_t x_stride;
    };
    template <typename Ktraits>
    __global__ __launch_bounds__(Ktraits::kThreads) void scale_kernel(ScaleParams params) {
        using input_t = typename Ktraits::input_t;
        const int i = blockIdx.x * Ktraits::kThreads + threadIdx.x;
        if (i >= params.n) return;
        const input_t *x = reinterpret_cast<const input_t *>(params.x_ptr);
        input_t *y = reinterpret_cast<input_t *>(params.y_ptr);
        const int j = params.gather == nullptr ? i : params.gather[i];
        y[i] = params.scale * x[j * params.x_stride];
    }
    """)
KERNEL = "scale_kernel<Traits<64, float>>"


def test_cuda_sim_writes_each_arrays_address_into_the_struct_and_checks_its_bounds():
    fields = [{"name": "n", "dtype": "int32", "value": 100},
              {"name": "x", "dtype": "pointer"}, {"name": "y", "dtype": "pointer"},
              {"name": "unused", "dtype": "pointer"}]
    assert structs.pointer_offsets(fields) == {"x": 8, "y": 16, "unused": 24}  # C's layout
    src = """
        struct P { int n; const float *x; float *y; int *unused; };
        __global__ void k(P p) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < p.n && p.unused == nullptr) p.y[i] = 2.0f * p.x[i];
        }"""
    record = structs.struct_value(fields, structs.struct_bytes(fields, {}, lambda v, _: v))
    x, y = np.arange(100, dtype=np.float32), np.zeros(100, np.float32)
    kernel = runners.get("cuda_sim").kernel(src, "k")
    run = kernel.launch(1, 128, [structs.with_pointers(fields, record, {"x": x, "y": y})])
    assert run.ok, run.findings
    np.testing.assert_array_equal(y, 2 * x)  # updated in place, as array arguments are
    assert run.extents["p.x"]["read"] == (0, 100) and run.extents["p.y"]["write"] == (0, 100)
    short = kernel.launch(1, 128, [structs.with_pointers(fields, record,
                                                         {"x": x[:50].copy(), "y": y})])
    assert any(f.kind == "out_of_bounds" and "'p.x' at element 50" in f.message
               for f in short.findings)


def test_each_pointer_field_read_becomes_a_typed_buffer():
    tr = translate_kernel(SRC, KERNEL)
    # typed by the cast, through the traits class's alias; the null test keeps KP_HAS_
    assert tr.flat == {"params_x_ptr": "params.x_ptr", "params_y_ptr": "params.y_ptr",
                       "params_gather": "params.gather"}
    assert tr.dtypes["params_x_ptr"] == "float" and tr.dtypes["params_gather"] == "int32_t"
    assert tr.roles["params_y_ptr"] == "out" and tr.roles["params_x_ptr"] == "in"
    assert tr.nullable == ["params_gather"]
    # the struct keeps each pointer's 8 bytes, as a ulong nobody reads
    assert "ulong x_ptr;" in tr.header and "void" not in tr.header.split("ScaleParams")[1]
    assert "params.x_ptr" not in tr.body and "reinterpret_cast<const input_t" not in tr.body
    assert "static constant constexpr int kThreads" in tr.header  # MSL: static data is constant
    assert "types.struct_pointer_field" in tr.rules_used


@pytest.mark.parametrize("body, why", [
    ("helper(params);", "the struct is used whole"),
    ("float *a = (float *) params.x_ptr; int *b = (int *) params.x_ptr;",
     "field x_ptr is read as both float and int"),
    ("Unknown *a = reinterpret_cast<Unknown *>(params.x_ptr);", "cannot resolve"),
])
def test_pointer_fields_kport_cannot_follow_are_a_todo_saying_why(body, why):
    src = ("struct Unknown; struct P { int n; void *x_ptr; };\n"
           "__device__ void helper(P p) { (void) p.x_ptr; }\n"
           f"__global__ void k(P params, float *out) {{ {body} out[0] = 1.0f; }}\n")
    tr = translate_kernel(src, "k")
    todo = [t for t in tr.todos if t.rule == "types.struct_param"]
    assert len(todo) == 1 and why in todo[0].construct, tr.todos
    assert not tr.flat


def test_port_accepts_and_run_takes_the_struct_with_arrays(tmp_path):
    path = tmp_path / "scale.cu"
    path.write_text(SRC)
    out = tmp_path / "pkg"
    proc = kport("port", str(path), "--kernel", KERNEL, "--offline", "--no-kb",
                 "--size", "n=300", "--grid", "ceil_div(n, 64)", "--block", "64",
                 "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads((out / "report.json").read_text())
    # optional integer data (indices) is left null: random values are no valid indices
    assert any(g.startswith("params_gather: null (optional integer data") for g in rep["guessed"])
    module = load_package(out, "kport_ptr_port")
    assert module.SPEC["args"]["params_x_ptr"]["field"] == "params.x_ptr"
    rng = np.random.default_rng(1)
    x = rng.standard_normal(2 * 40).astype(np.float32)
    got = module.run(params={"n": 40, "scale": 3.0, "x_stride": 2, "x_ptr": x})
    assert set(got) == {"params.y_ptr"}  # an output field comes back under STRUCT.FIELD
    np.testing.assert_allclose(module.as_numpy("params.y_ptr", got["params.y_ptr"]),
                               3.0 * x[::2], rtol=1e-6)
    gather = rng.integers(0, 40, 40).astype(np.int32)
    got = module.run(params={"n": 40, "scale": 1.0, "x_stride": 1, "x_ptr": x,
                             "gather": gather, "y_ptr": np.zeros(40, np.float32)})
    np.testing.assert_allclose(np.asarray(got["params.y_ptr"]), x[gather], rtol=1e-6)
    with pytest.raises(TypeError, match=r"missing array argument params\['x_ptr'\]"):
        module.run(params={"n": 40, "scale": 1.0, "x_stride": 1})


def test_a_struct_passed_whole_to_a_function_that_reads_no_pointer_field_is_flattened():
    """torch-scatter hands its TensorInfo to IndexPtrToOffset::get, which reads only sizes and
    strides: the port's copy of the struct has those, so the data pointer is flattened."""
    src = textwrap.dedent("""\
        struct Info { float *data; int sizes[2]; int dims; };
        template <typename T> struct ToOffset {
            static __device__ int get(int i, const Info &info) { return i % info.sizes[0]; }
        };
        __device__ float peek(const Info &info) { return info.data[0]; }
        __global__ void k(Info info, float *out) {
            out[threadIdx.x] = info.data[ToOffset<int>::get(threadIdx.x, info)];
        }
        __global__ void j(Info info, float *out) { out[threadIdx.x] = peek(info); }
        """)
    assert translate_kernel(src, "k").flat == {"info_data": "info.data"}
    tr = translate_kernel(src, "j")  # peek reads the pointer: not followed, said
    assert not tr.flat and "the struct is used whole" in tr.todos[0].construct


ROWS_SRC = textwrap.dedent("""\
    #include <cstdint>
    struct RowParams {
        int batch, dim, len;
        uint32_t x_batch_stride, x_c_stride, x_l_stride;
        uint32_t state_batch_stride, state_c_stride, state_l_stride;
        void *__restrict__ x_ptr;
        void *__restrict__ state_ptr;
        int32_t *lens;  // read only when kRagged
    };
    template <bool kRagged>
    __global__ void shift_in(RowParams params) {
        const int b = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
        if (c >= params.dim) return;
        const float *x = reinterpret_cast<float *>(params.x_ptr) + b * params.x_batch_stride
            + c * params.x_c_stride;
        float *state = reinterpret_cast<float *>(params.state_ptr)
            + b * params.state_batch_stride + c * params.state_c_stride;
        const int n = kRagged ? params.lens[b] : params.len;
        // shift the row left by n in place (reads run ahead of the writes), then append x
        for (int i = 0; i < 8 - n; ++i)
            state[i * params.state_l_stride] = state[(i + n) * params.state_l_stride];
        const float last = state[7 * params.state_l_stride];  // not written yet: the old one
        for (int i = 0; i < n; ++i)
            state[(8 - n + i) * params.state_l_stride] = x[i * params.x_l_stride] + 0.5f * last;
    }
    """)


def test_a_params_struct_gets_contiguous_strides_and_an_in_place_shift_ports(tmp_path):
    """causal-conv1d's update kernel in small: stride fields guessed 1 made the rows of every
    array overlap (threads wrote the same elements), so they are measured (contiguous); the
    in-place shift reads elements the thread has not written yet, which the port must read
    from the input, not its fresh output; the dead `kRagged` branch asks for no `lens`."""
    path = tmp_path / "shift.cu"
    path.write_text(ROWS_SRC)
    out = tmp_path / "pkg"
    proc = kport("port", str(path), "--kernel", "shift_in<false>", "--offline", "--no-kb",
                 "--size", "batch=2", "--size", "dim=70", "--size", "len=3",
                 "--grid", "batch, ceil_div(dim, 64)", "--block", "64", "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    case = (out / "case.guessed.toml").read_text()
    assert '{ name = "x_batch_stride", dtype = "uint32", value = "dim * len" }' in case
    assert '{ name = "state_c_stride", dtype = "uint32", value = 8 }' in case
    module = load_package(out, "kport_shift_port")
    assert "params_lens" not in module.SPEC["args"]
    rng = np.random.default_rng(3)
    b, d, n = 3, 5, 2
    x, state = rng.standard_normal((b, d, n)).astype(np.float32), \
        rng.standard_normal((b, d, 8)).astype(np.float32)
    got = module.run(params={
        "batch": b, "dim": d, "len": n, "x_batch_stride": d * n, "x_c_stride": n,
        "x_l_stride": 1, "state_batch_stride": d * 8, "state_c_stride": 8,
        "state_l_stride": 1, "x_ptr": x.reshape(-1), "state_ptr": state.reshape(-1)})
    want = np.concatenate([state[:, :, n:], x + 0.5 * state[:, :, 7:]], -1)
    np.testing.assert_array_equal(np.asarray(got["params.state_ptr"]).reshape(b, d, 8), want)
