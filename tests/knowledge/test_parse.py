"""Tree-sitter parsing of CUDA, Metal, Python metal_kernel sources, Markdown and RST."""

from kb.ingest import markdown_chunks, rst_chunks
from kb.parse import functions, kernel_closure, python_metal_kernels

CUDA = """
template <int W>
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
__device__ float twice(float v) { return warp_sum<32>(v) * 2.0f; }
__device__ float unused(float v) { return v; }
namespace ops {
template <int BLOCK>
__global__ void __launch_bounds__(256) row_sum(const float* __restrict__ x, float* y) {
  y[blockIdx.x] = twice(x[threadIdx.x]);
}
}
extern "C" { __global__ void plain(float* a) { a[0] = 1.0f; } }
void host_launch() { }
"""

METAL = """
#include <metal_stdlib>
using namespace metal;
inline float sq(float v) { return v * v; }
template <typename T>
kernel void kernel_sq(device const T* src [[buffer(0)]], device T* dst [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
  dst[i] = sq(src[i]);
}
template [[host_name("kernel_sq_f32")]] kernel void kernel_sq<float>(
    device const float*, device float*, uint);
[[kernel]] void attr_kernel(device float* x [[buffer(0)]]) { x[0] = 0; }
"""


def test_cuda_functions_kinds_and_flags():
    fs = {f.name: f for f in functions(CUDA, "cuda")}
    assert {n: f.kind for n, f in fs.items()} == {
        "warp_sum": "device", "twice": "device", "unused": "device", "row_sum": "kernel",
        "plain": "kernel", "host_launch": "host"}
    assert fs["row_sum"].template and fs["row_sum"].launch_bounds
    assert fs["warp_sum"].template and not fs["twice"].template
    assert fs["row_sum"].text.lstrip().startswith("template <int BLOCK>")
    assert fs["row_sum"].start_line == 10


def test_closure_follows_calls_transitively_and_skips_unused():
    fs = functions(CUDA, "cuda")
    table = {f.name: f for f in fs if f.kind != "kernel"}
    kernel = next(f for f in fs if f.name == "row_sum")
    assert [f.name for f in kernel_closure(kernel, table)] == ["warp_sum", "twice", "row_sum"]


def test_metal_kernels_found_despite_cpp_grammar():
    fs = {f.name: f.kind for f in functions(METAL, "metal")}
    assert fs == {"sq": "device", "kernel_sq": "kernel", "attr_kernel": "kernel"}


def test_python_metal_kernel_sources():
    src = '''
import mlx.core as mx
BODY = """
uint i = thread_position_in_grid.x;
out[i] = inp[i] * 2;
"""
HEAD = "inline float two() { return 2; }"
k = mx.fast.metal_kernel(name="double_it", input_names=["inp"], output_names=["out"],
                         source=BODY, header=HEAD)
dyn = mx.fast.metal_kernel(name="dyn", input_names=["a"], output_names=["b"], source=f"{BODY}")
'''
    found = python_metal_kernels(src)
    assert [k.name for k in found] == ["double_it"]  # the f-string source is not a literal
    k = found[0]
    assert "out[i] = inp[i] * 2;" in k.source and k.header.startswith("inline float two")
    assert k.input_names == ("inp",) and k.output_names == ("out",) and k.line == 8


def test_markdown_sections_carry_heading_paths():
    md = ("# Guide\n\nintro\n\n## Warps\n\nshuffle text\n\n### Masks\n\nmask text\n\n"
          "## Atomics\n\nadd\n")
    chunks = markdown_chunks(md, "guide.md", "docs")
    assert [c.title for c in chunks] == ["Guide", "Guide > Warps", "Guide > Warps > Masks",
                                        "Guide > Atomics"]
    assert "mask text" in chunks[2].text and "shuffle text" not in chunks[2].text


def test_rst_sections():
    rst = ("Guide\n=====\n\nintro\n\nWarps\n-----\n\nshuffle text\n\n"
           ".. code-block:: c\n\n   int x;\n")
    chunks = rst_chunks(rst, "guide.rst", "docs")
    assert [c.title for c in chunks] == ["Guide", "Guide > Warps"]
    assert "int x;" in chunks[1].text
