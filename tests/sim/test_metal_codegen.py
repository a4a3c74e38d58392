"""The text metal_sim generates must be MLX 0.32's, byte for byte.

Expected strings come from shared/reference/mlx-metal-kernel.md §1.2 (read from MLX's source),
not from our code.
"""

import numpy as np

from runners.dtypes import to_tensor
from runners.metal_sim import codegen, metal_kernel

NAME = "custom_kernel_arg_test__1_3_float16_t_float_int32_tc_bfloat16_tc_floats_float_int32_t"
WORKED_EXAMPLE = """template <bool e, int f, typename T>
[[kernel]] void NAME(
  const device float* a [[buffer(0)]],
  const constant int32_t* b [[buffer(1)]],
  const constant bfloat16_t* c [[buffer(2)]],
  const constant float& d [[buffer(3)]],
  device float* out1 [[buffer(4)]],
  device int32_t* out2 [[buffer(5)]],
  uint3 thread_position_in_grid [[thread_position_in_grid]]) {
BODY
}
"""


def _worked_inputs():
    import mlx.core as mx

    return [to_tensor(np.zeros((3, 6), np.float32)), to_tensor(mx.array([3, 4, 5])),
            to_tensor(mx.zeros((2, 2), dtype=mx.bfloat16)), to_tensor(7.3)]


def test_worked_example_of_the_reference():
    template = [("e", True), ("f", 3), ("T", "float16_t")]
    inputs = _worked_inputs()
    func = codegen.kernel_name("arg_test", template, inputs, ["float", "int32_t"])
    body = "  out1[0] = thread_position_in_grid.x;"
    text, params = codegen.signature(func, "", body, ["a", "b", "c", "d"], inputs,
                                     ["out1", "out2"], ["float", "int32_t"], template, False)
    assert text == WORKED_EXAMPLE.replace("BODY", body).replace("NAME", NAME)
    assert [p.kind for p in params] == ["input", "input", "input", "input_ref", "output",
                                        "output"]


def test_python_scalars_follow_mlx_conversion():
    assert to_tensor(7).dtype == "int32"
    assert to_tensor(2**40).dtype == "int64"
    assert to_tensor(1.5).dtype == "float32"
    assert to_tensor(True).dtype == "bool"


def test_shape_strides_ndim_by_substring_and_only_in_source():
    inputs = [to_tensor(np.zeros((4, 8), np.float32))]
    # "x_shape" appears only in a comment and "x_ndim" only in the header: MLX adds x_shape only.
    source = "// x_shape\nuint i = thread_position_in_grid.x;"
    text, params = codegen.signature("k", "// x_ndim", source, ["x"], inputs, ["y"], ["float"],
                                     [], False)
    assert "const constant int* x_shape [[buffer(1)]]," in text
    assert "x_strides" not in text.split("// x_shape")[0]
    assert "x_ndim [[" not in text
    assert [p.name for p in params] == ["x", "x_shape", "y"]


def test_attribute_substring_quirk_adds_both_dispatch_and_plain():
    attrs = [a for a, _ in codegen.used_attributes("dispatch_threads_per_threadgroup.x")]
    assert attrs == ["dispatch_threads_per_threadgroup", "threads_per_threadgroup"]


def test_comma_quirk_with_shape_buffers_and_two_outputs_is_reproduced():
    inputs = [to_tensor(np.zeros(16, np.float32))]
    text, _ = codegen.signature("k", "", "out1[0] = x_shape[0];", ["x"], inputs,
                                ["out1", "out2"], ["float", "float"], [], False)
    # MLX closes the signature after out1 because the shape buffer is counted in `index`.
    assert "device float* out1 [[buffer(2)]]) {" in text


def test_atomic_outputs_and_small_inputs_go_to_constant():
    inputs = [to_tensor(np.zeros(7, np.int32)), to_tensor(np.zeros(8, np.int32))]
    text, _ = codegen.signature("k", "", "uint i = thread_position_in_grid.x;", ["s", "l"],
                                inputs, ["o"], ["float"], [], True)
    assert "const constant int32_t* s [[buffer(0)]]," in text
    assert "const device int32_t* l [[buffer(1)]]," in text
    assert "device atomic<float>* o [[buffer(2)]]," in text


def test_verbose_prints_the_mlx_text(capsys):
    import mlx.core as mx

    k = metal_kernel("v", ["x"], ["y"], "y[0] = x[0];")
    try:
        k(inputs=[mx.zeros((16,))], output_shapes=[(1,)], output_dtypes=[mx.float32],
          grid=(1, 1, 1), threadgroup=(1, 1, 1), verbose=True)
    except RuntimeError:
        pass  # printing happens before building; the build is tested elsewhere
    out = capsys.readouterr().out
    assert out.startswith("Generated source code for `v`:\n```\n"
                          "[[kernel]] void custom_kernel_v_float_float(")
