"""Idioms of real llama.cpp kernels that kport got wrong (issue 15, found by porting kernels
kport had never seen: cumsum's width shuffles, fwht's `__launch_bounds__` before `__global__`
and its `static constexpr` locals, a host launch reading `info.warp_size`). Each port is
checked against the CUDA kernel in cuda_sim at two size sets."""

from __future__ import annotations

import textwrap

from agent.host_launch import find_launches
from tests.cli import kport, load_package


def _port(tmp_path, src: str, kernel: str, *flags: str):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(src))
    return kport("port", str(path), "--kernel", kernel, "--offline", "--no-kb",
                 "--out", str(tmp_path / "pkg"), *flags)


def test_width_shuffles_keep_their_segments(tmp_path):
    """__shfl_up_sync/__shfl_down_sync with a width below 32: the own value where the source
    lane leaves the segment, also inside a helper function (which then needs the lane id)."""
    proc = _port(tmp_path, """\
        __device__ float seg_scan(float v, int w) {
          for (int d = 1; d < w; d *= 2) {
            float o = __shfl_up_sync(0xffffffffu, v, d, w);
            if ((threadIdx.x & (w - 1)) >= d) v += o;
          }
          return v;
        }
        __global__ void k(const float* x, float* y, float* z, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          y[i] = seg_scan(x[i], 8);
          z[i] = __shfl_down_sync(0xffffffffu, x[i], 3, 16);
        }
        """, "k", "--size", "n=256", "--grid", "1", "--block", "256")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    metal = (tmp_path / "pkg" / "kernel.metal").read_text()
    assert "kport_shfl_up_w" in metal and "kport_shfl_down_w" in metal


def test_launch_bounds_first_and_static_constexpr_locals(tmp_path):
    """fwht's `__launch_bounds__(...)` before `__global__` made the closure copy the kernel a
    second time (a redefinition); MSL has no static locals, and a constexpr needs none."""
    proc = _port(tmp_path, """\
        template <int N>
        __launch_bounds__(128, 1)
        __global__ void k(const float* x, float* y, int n) {
          static constexpr int kScale = 3;
          static constexpr float w[2] = {0.5f, 2.0f};
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) y[i] = x[i] * kScale * w[i % 2] + N;
        }
        void launch(const float* x, float* y, int n) { k<4><<<(n + 127) / 128, 128>>>(x, y, n); }
        """, "k<4>", "--size", "n=300")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    cuda = next((tmp_path / "pkg").glob("*.device.cu")).read_text()
    assert cuda.count("void k(") == 1


def test_a_host_launch_reads_no_member_as_a_local():
    """`const int nsm = info.nsm;` once made `info.(info.(...))`: a member name after `.` is no
    local to substitute (the queried warp size is CUDA's 32: tests/translate/test_host_launch)."""
    src = textwrap.dedent("""\
        __global__ void k(float* y, int n) { y[threadIdx.x] = n; }
        void launch(float* y, int n, const device_info & info) {
          const int nsm = info.nsm;
          k<<<(n + nsm - 1) / nsm, nsm>>>(y, n);
        }
        """)
    (launch,) = find_launches(src, "k")
    assert launch.grid is None and not any("info.(" in p for p in launch.problems)
    assert any("(info.nsm)" in p and "depends on" in p for p in launch.problems)


def test_a_buffer_read_only_after_its_first_write_is_an_output():
    """group_norm writes dst, then scales it in place (`dst[j] *= scale`): the kernel reads
    only what it wrote, so dst is an output the caller gives no data for. A read before the
    first write (in a loop too) keeps it in-out."""
    from agent.translate import translate_kernel

    def role(body: str) -> str:
        src = ("__global__ void k(const float* x, float* dst, int n) "
               f"{{ int i = threadIdx.x; {body} }}")
        return translate_kernel(src, "k").roles["dst"]

    assert role("dst[i] = x[i]; dst[i] *= 2.0f;") == "out"
    assert role("float* row = dst + i; row[0] = x[i]; float v = row[0]; dst[i] = v + 1;") == "out"
    assert role("dst[i] *= 2.0f;") == "inout"
    assert role("for (int j = 0; j < n; j++) { float v = dst[j]; dst[j] = v + x[j]; }") == "inout"


def test_a_typed_launch_still_takes_the_scalars_the_host_passes(tmp_path):
    """cumsum's host passes `nb01 / sizeof(float)` as the kernel's s01; with --grid typed (its
    launch reads a device query) that binding was lost and s01 was guessed 1, so rows
    overlapped. A size named after the kernel's own scalar still gives it."""
    proc = _port(tmp_path, """\
        __global__ void k(const float* x, float* y, const int ncols, const int s01) {
          const int row = blockIdx.x;
          for (int c = threadIdx.x; c < ncols; c += blockDim.x)
            y[row * ncols + c] = 2 * x[row * s01 + c];
        }
        void launch(const float* x, float* y, int ncols, int nrows, size_t nb01, int nsm) {
          k<<<nrows, nsm * 4>>>(x, y, ncols, nb01 / sizeof(float));
        }
        """, "k", "--size", "ncols=50", "--size", "nrows=6", "--size", "nb01=256",
        "--grid", "nrows", "--block", "64")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    case = (tmp_path / "pkg" / "case.guessed.toml").read_text()
    assert 'value = "nb01 // 4"' in case, case


def test_a_trailing_blank_after_an_empty_macro_does_not_hide_the_next_struct(tmp_path):
    """causal-conv1d defines `#define ROCM_ONLY(x) ` (a blank after the empty body), which
    tree-sitter reads as swallowing the end of the struct after it: the struct parameter was
    then "not defined in the source read". The source is read without trailing blanks."""
    from agent.cuda_source import read_cuda
    from agent.translate import translate_kernel

    path = tmp_path / "k.cu"
    path.write_text("#define ROCM_ONLY(x) \n\nstruct P {\n  int n;\n  float s;\n};\n"
                    "__global__ void k(P p, float* y) { y[threadIdx.x] = p.s * p.n; }\n")
    view = read_cuda(path, [], [])
    tr = translate_kernel(view.text, "k")
    assert "p" in tr.structs and not tr.todos, tr.todos


def test_scalars_with_cpp_defaults_take_them_and_run_may_omit_them(tmp_path):
    """Issue 15 item 4: a kernel parameter with a C++ default value (`scale = 2.0f`) is cased
    with that value, and the package's run() takes it or leaves it out."""

    import numpy as np

    proc = _port(tmp_path, """\
        __global__ void k(const float* x, float* y, const int n, const float scale = 2.0f,
                          const int off = 0) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) y[i] = x[i] * scale + off;
        }
        """, "k", "--size", "n=300")
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    module = load_package(tmp_path / "pkg", "kport_default_port")
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(module.run(x=x, n=10)["y"]), 2 * x)
    np.testing.assert_array_equal(np.asarray(module.run(x=x, n=10, scale=1, off=3)["y"]), x + 3)


def test_the_closure_keeps_what_a_kept_traits_class_computes_at_compile_time():
    """causal-conv1d's traits class sizes its shared memory with `static constexpr int
    kSmemSize = custom_max({...})`: the constexpr function is code that runs (at compile
    time), so the device-code closure keeps it."""
    from agent.translate import cuda_closure

    src = textwrap.dedent("""\
        constexpr int pick_max(int a, int b) { return a > b ? a : b; }
        int host_only(int a) { return a; }
        template <int N> struct Traits { static constexpr int kSmem = pick_max(N, 64); };
        template <typename K> __global__ void k(float* y) { y[threadIdx.x] = K::kSmem; }
        """)
    closure = cuda_closure(src, "k<Traits<32>>")
    assert "constexpr int pick_max" in closure and "host_only" not in closure
