"""Issue 15 (probe 17): what a kernel writes and reads through the device functions it hands
its buffers to (vLLM's rotary embedding, DeepSpeed's ``void *`` load/store helpers), and the
memory those helpers' pointers get in Metal. Each port runs like the CUDA kernel."""

import numpy as np

from agent.translate import translate_kernel

from .test_translate import run_both

# in the style of vLLM's pos_encoding_kernels.cu: the kernel writes q and k only two helpers
# down, through an offset pointer; `norm` is written before it is read; `table` is non-const
# but only read
ROTATE = """
template <typename T, bool FLIP>
inline __device__ void turn_pair(T* __restrict__ arr, const T* __restrict__ cs, int off,
                                 int half_dim) {
  const T c = cs[off];
  const T s = cs[half_dim + off];
  const T x = arr[off];
  const T y = arr[half_dim + off];
  arr[off] = FLIP ? y * c + x * s : x * c - y * s;
  arr[half_dim + off] = FLIP ? x * c - y * s : y * c + x * s;
}
template <typename T, bool FLIP>
inline __device__ void turn_heads(T* __restrict__ q, T* __restrict__ k, const T* cache,
                                  int heads, int dim, int row) {
  const T* cs = cache + row * dim;
  for (int i = threadIdx.x; i < heads * (dim / 2); i += blockDim.x) {
    const int head = i / (dim / 2);
    turn_pair<T, FLIP>(q + (row * heads + head) * dim, cs, i % (dim / 2), dim / 2);
    turn_pair<T, FLIP>(k + (row * heads + head) * dim, cs, i % (dim / 2), dim / 2);
  }
}
__device__ void put_norm(float* dst, float v) { dst[0] = v; dst[0] = dst[0] * 2.0f; }
__global__ void rotate(float* q, float* k, float* table, float* norm, int heads, int dim) {
  turn_heads<float, false>(q, k, table, heads, dim, blockIdx.x);
  if (threadIdx.x == 0) put_norm(norm + blockIdx.x, (float) heads);
}
"""


def test_writes_through_helpers_at_any_depth_give_the_kernel_its_outputs():
    rows, heads, dim = 3, 2, 8
    rng = np.random.default_rng(7)
    q, k = (rng.standard_normal(rows * heads * dim).astype(np.float32) for _ in range(2))
    table = rng.standard_normal(rows * dim).astype(np.float32)
    tr, want, got = run_both(ROTATE, "rotate", {"q": q, "k": k, "table": table,
                                                "heads": np.int32(heads), "dim": np.int32(dim)},
                             {"norm": np.zeros(rows, np.float32)}, [str(rows)], [4])
    # q and k are read before the helper writes them: in place; norm is only written
    assert tr.roles == {"q": "inout", "k": "inout", "table": "in", "norm": "out",
                        "heads": "scalar", "dim": "scalar"}
    assert tr.todos == []  # `const T* cs = table + ...` in a helper has the parameter's space
    for name in ("q", "k", "norm"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)


# in the style of DeepSpeed's memory_access_utils.h: a byte copy through `void *` parameters,
# declared, then specialised per access size; the kernel reads into a register array
VOID_COPY = """
namespace kp_mem {
template <int Bytes> __device__ __forceinline__ void load_global(void* dst, const void* src);
template <> __device__ __forceinline__ void load_global<16>(void* dst, const void* src) {
  uint4* data = reinterpret_cast<uint4*>(dst);
  const uint4* src_cast = reinterpret_cast<const uint4*>(src);
  data[0] = src_cast[0];
}
template <int Bytes> __device__ __forceinline__ void store_global(void* dst, const void* src);
template <> __device__ __forceinline__ void store_global<16>(void* dst, const void* src) {
  uint4* data = reinterpret_cast<uint4*>(dst);
  const uint4* src_cast = reinterpret_cast<const uint4*>(src);
  data[0] = src_cast[0];
}
}
__global__ void scale_copy(float* out, const float* a, float g, int n) {
  constexpr int per = 16 / sizeof(float);
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * per;
  float buf[per];
  kp_mem::load_global<16>(buf, a + base);
  for (int j = 0; j < per; j++) buf[j] = g * buf[j];
  if (base < n) kp_mem::store_global<16>(out + base, buf);
}
"""


def test_void_pointer_helpers_write_the_callers_buffer_in_its_memory():
    n = 256
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    tr, want, got = run_both(VOID_COPY, "scale_copy", {"a": x, "g": np.float32(1.5),
                                                       "n": np.int32(n)},
                             {"out": np.zeros(n, np.float32)}, ["2"], [32])
    assert tr.outputs == ["out"] and tr.todos == []
    # each void* parameter takes the memory its callers hand it: registers or device memory
    assert "load_global<16>(thread void* dst, const device void* src)" in tr.header
    assert "store_global<16>(device void* dst, const thread void* src)" in tr.header
    assert "reinterpret_cast<device uint4*>(dst)" in tr.header
    np.testing.assert_allclose(got["out"], want["out"], rtol=0, atol=0)
    np.testing.assert_allclose(want["out"], 1.5 * x, rtol=1e-6)


def test_a_void_helper_handed_registers_and_device_memory_stays_device():
    # one call hands registers, the other device memory: no one space fits both, the
    # parameter stays `device` and the port does not compile (never a silent guess)
    src = VOID_COPY.replace("kp_mem::store_global<16>(out + base, buf)",
                            "kp_mem::load_global<16>(out + base, a + base)")
    tr = translate_kernel(src, "scale_copy", grid=["2"], block=[32])
    assert "load_global<16>(device void* dst, const device void* src)" in tr.header


def test_specialisations_with_scoped_arguments_keep_the_templates_spaces():
    """DeepSpeed's `load_global<16, LoadPolicy::CacheGlobal>`: a specialisation named with a
    scoped argument is the same function for its parameters' spaces; one the kernel never
    calls once kept `device void*` where the template had `thread void*`, and Metal refused it
    ("no function template matches function template specialization")."""
    src = VOID_COPY.replace(
        "template <int Bytes> __device__ __forceinline__ void load_global(void* dst, "
        "const void* src);",
        "enum class Policy { All, Global };\n"
        "template <int Bytes, Policy p = Policy::All> __device__ __forceinline__ void "
        "load_global(void* dst, const void* src);\n"
        "template <> __device__ __forceinline__ void load_global<16, Policy::Global>("
        "void* dst, const void* src) {\n"
        "  reinterpret_cast<uint4*>(dst)[0] = reinterpret_cast<const uint4*>(src)[0];\n}")
    n = 256
    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    tr, want, got = run_both(src, "scale_copy", {"a": x, "g": np.float32(0.5), "n": np.int32(n)},
                             {"out": np.zeros(n, np.float32)}, ["2"], [32])
    assert "load_global<16, Policy::Global>(thread void* dst, const device void* src)" \
        in tr.header
    np.testing.assert_allclose(got["out"], want["out"], rtol=0, atol=0)
