"""The token rewrites that make Metal/CUDA source compile as C++ keep lines and meaning."""

import pytest

from runners.srcrewrite import (
    SourceError,
    rewrite_group_storage,
    rewrite_metal_constructors,
    strip_address_spaces,
)

METAL = """kernel void k(device float* a [[buffer(0)]], threadgroup float* tp) {
  threadgroup float s[64][65];   // threadgroup float fake[3];
  threadgroup float* p = &s[0][0];
  const char* msg = "threadgroup float nope[2];";
  float4 v = float4(a[0], 1.0f,
                    2, 3);
  half4 h = (half4)v + static_cast<half4>(v);
  float3 w = metal::float3(v.xyz);
}"""


def test_lines_are_preserved_by_every_rewrite():
    out = rewrite_metal_constructors(strip_address_spaces(rewrite_group_storage(METAL,
                                                                                "threadgroup")))
    assert out.count("\n") == METAL.count("\n")
    assert out.splitlines()[7].strip() == "float3 w = __kp::make<float3>(v.xyz);"


def test_threadgroup_storage_but_not_pointers_comments_or_strings():
    out = rewrite_group_storage(METAL, "threadgroup")
    assert '__kp_tg_alloc(&__kp_site_s, sizeof(__kp_T_s)' in out
    assert "using __kp_T_s = float[64][65];" in out
    assert "// threadgroup float fake[3];" in out
    assert '"threadgroup float nope[2];"' in out
    assert "threadgroup float* p" in out  # pointers are only stripped later
    assert "threadgroup float* tp" in out


def test_constructors_and_casts():
    out = rewrite_metal_constructors(METAL)
    assert "__kp::make<float4>(a[0], 1.0f," in out
    assert "__kp::convert<half4>(v) + __kp::convert<half4>(v)" in out


def test_a_reference_or_pointer_to_an_array_of_vectors_is_no_constructor():
    """``reinterpret_cast<thread float4 (&)[1]>(v)`` (a port's view of a local array, mamba's
    load_input) names a type: read as ``float4(&)`` made from arguments it did not compile."""
    src = ("thread float4 (&r)[1] = reinterpret_cast<thread float4 (&)[1]>(v);\n"
           "float4 (*q)[2] = p; float4 c = float4(*p) + float4(q[0][1].x);")
    out = " ".join(rewrite_metal_constructors(strip_address_spaces(src)).split())
    assert "float4 (&r)[1] = reinterpret_cast< float4 (&)[1]>(v);" in out
    assert "float4 (*q)[2] = p;" in out and "__kp::make<float4>(*p)" in out
    assert "__kp::make<float4>(q[0][1].x)" in out


def test_address_spaces_vanish_from_types():
    out = strip_address_spaces(METAL)
    assert "device" not in out.split("\n")[0] and "threadgroup" not in out.split("\n")[0]


def test_cuda_shared_forms():
    cu = """extern __shared__ __align__(16) unsigned char smem[];
__global__ void f(float* x) {
  __shared__ float tile[32][33];
  static __shared__ int flag;
  extern __shared__ float dyn[];
}"""
    out = rewrite_group_storage(cu, "__shared__")
    assert "static __thread unsigned char* smem;" in out
    assert "__kp_register_dyn_smem" in out
    assert "using __kp_T_tile = float[32][33];" in out
    assert "using __kp_T_flag = int;" in out
    assert "float (&dyn)[] = *reinterpret_cast<float (*)[]>(__kp_dyn_smem());" in out


@pytest.mark.parametrize("decl, why", [
    ("__shared__ float a[4] = {0};", "without an initializer"),
    ("__shared__ float a[];", "needs a size"),
])
def test_bad_shared_declarations_name_the_line(decl, why):
    with pytest.raises(SourceError, match=f"line 2: .*{why}"):
        rewrite_group_storage("__global__ void f() {\n  " + decl + "\n}", "__shared__")


def test_file_scope_shared_is_refused_with_advice():
    with pytest.raises(SourceError, match="line 1: file-scope __shared__ variable `t`"):
        rewrite_group_storage("__shared__ float t[8];\n__global__ void f() {}", "__shared__")
