"""Coverage counts only what was translated (issue 15): a name nothing defines (a library such
as CUB, a traits class from a header not given, an unknown helper), a struct parameter and a
kernel without outputs are each a counted KPORT-TODO; names the source defines, Metal's own
library and type casts are not."""

import textwrap

from agent.translate import translate_kernel


def _todos(src: str, kernel: str = "k") -> list[tuple[str, str]]:
    tr = translate_kernel(textwrap.dedent(src), kernel)
    return [(t.rule, t.construct) for t in tr.todos]


def test_names_nothing_defines_are_todos():
    todos = _todos("""
        __global__ void k(const float * x, float * y, int n) {
            int i = threadIdx.x;
            float v = mystery_helper(x[i]);
            y[i] = Ktraits::scale * v + cub::FFMA_RZ(v, 1.0f, 0.0f);
        }
        """)
    assert todos == [("types.unknown_name", "mystery_helper"),
                     ("types.unknown_name", "Ktraits::scale"),
                     ("types.unknown_name", "cub::FFMA_RZ")]  # kport_cub has no FFMA_RZ


def test_what_the_source_or_metal_defines_is_no_todo():
    tr = translate_kernel(textwrap.dedent("""
        namespace ops { __device__ float twice(float v) { return v + v; } }
        struct Traits { static constexpr int n = 4; };
        template <typename T, typename Tr>
        __device__ T scaled(T v) { return v * Tr::n; }
        __global__ void k(const float * x, float * y, int n) {
            int i = threadIdx.x;
            auto op = [](float a) { return a; };
            float v = sqrt(fabs(x[i])) + min(x[i], 1.0f) + float(size_t(n));
            y[i] = ops::twice(scaled<float, Traits>(v)) + op(v);
        }
        """), "k")
    assert [t.rule for t in tr.todos] == ["types.lambda"]  # the lambda only, not `op(v)`


def test_a_struct_parameter_kport_cannot_pass_is_a_todo_saying_why():
    """A struct of scalars travels as its bytes (not a TODO), and so does one with a pointer
    field (flattened into a buffer: pointer_fields.py); an array of pointers cannot yet, nor a
    3-vector (CUDA's uint3 is 12 bytes, Metal's 16); a template type parameter is no struct."""
    kernel = """
        template <typename T>
        __global__ void k(Params p, const T * x, T * y, const T scale) {
            y[threadIdx.x] = x[threadIdx.x] * p.a * scale;
        }
        """
    assert _todos("struct Params { float a; int n; };" + kernel, "k<float>") == []
    assert _todos("struct Params { float a; float * w; };" + kernel, "k<float>") == []
    assert _todos("struct Params { float a; float * w[2]; };" + kernel, "k<float>") == [
        ("types.struct_param", "struct parameter p (Params): struct Params: field '* w[2]' is "
                               "not passed yet")]
    assert _todos("struct Params { float a; uint3 d; };" + kernel, "k<float>") == [
        ("types.struct_param", "struct parameter p (Params): struct Params: field 'd' is a "
                               "uint3, whose size and alignment differ between CUDA and Metal")]


def test_a_kernel_without_outputs_is_a_todo():
    tr = translate_kernel("__global__ void k(const float * x, int n) { float s = x[n]; }\n", "k")
    assert [(t.rule, t.line) for t in tr.todos] == [("memory.kernel_outputs", 1)]
    assert tr.coverage < 1.0
