"""runners/opcount.py on IR written by hand, and the model's use of counted operations."""

from __future__ import annotations

import pytest

from kb.perf_chips import perf_chip
from runners.opcount import block_table, classify, is_user_file, operation_counts
from runners.perf_model import Launch, predict

GUARD1 = ("call void @__sanitizer_cov_trace_pc_guard(ptr getelementptr inbounds "
          "([2 x i32], ptr @__sancov_gen_, i64 0, i64 1))")
IR = """define void @k(ptr %0) {
  call void @__sanitizer_cov_trace_pc_guard(ptr @__sancov_gen_) #8, !dbg !10
  %2 = fmul float %a, %b, !dbg !10
  %3 = call float @expf(float %2), !dbg !11
  %4 = fadd float %2, %3, !dbg !11
  br label %5

5:                                                ; preds = %1
  {GUARD1} #8, !dbg !12
  %6 = add i32 %x, 1, !dbg !12
  %7 = add i32 %x, 2, !dbg !13
  ret void
}
declare void @__sanitizer_cov_trace_pc_guard(ptr)
!1 = !DIFile(filename: "source.metal", directory: "/tmp")
!2 = !DIFile(filename: "/opt/include/kport/metal/math.h", directory: "")
!3 = distinct !DISubprogram(name: "k", scope: !1, file: !1, line: 1, unit: !0)
!4 = distinct !DISubprogram(name: "exp", scope: !2, file: !2, line: 9, unit: !0)
!5 = distinct !DISubprogram(name: "__kp_entry_body", scope: !2, file: !2, line: 9, unit: !0)
!10 = !DILocation(line: 1, column: 3, scope: !3)
!11 = !DILocation(line: 9, column: 1, scope: !4, inlinedAt: !10)
!12 = !DILocation(line: 9, column: 1, scope: !5)
!13 = !DILocation(line: 2, column: 1, scope: !3)
""".replace("{GUARD1}", GUARD1)


@pytest.mark.parametrize("line, ops", [
    ("%5 = fadd <4 x float> %a, %b", {"fp32": 4}),
    ("%5 = fmul half %a, %b", {"fp16": 1}),
    ("%5 = fdiv double %a, %b", {"fp64": 1, "transcendental": 1}),
    ("%5 = call float @llvm.fmuladd.f32(float %a, float %b, float %c)", {"fp32": 1}),
    ("%5 = tail call float @tanhf(float %a)", {"transcendental": 1}),
    ("%5 = call double @llvm.sqrt.f64(double %a)", {"transcendental": 1}),
    ("%5 = icmp ult i32 %a, %b", {"int": 1}),
    ("%5 = mul nsw i64 %a, %b", {"int_mul": 1}),
    ("%5 = zext i32 %a to i64", {}),
    ("store float %a, ptr %p, align 4", {}),
])
def test_classify_one_instruction(line, ops):
    assert classify(line) == ops


def test_user_files_are_those_not_kports():
    assert is_user_file("source.metal") and is_user_file("/home/me/kernel.cu")
    assert not is_user_file("kport-entry") and not is_user_file("mlx-signature")
    assert not is_user_file("/x/runners/simcore/include/kport/rt.h")


def test_block_table_numbers_blocks_and_keeps_what_the_users_lines_do():
    text, table = block_table(IR)
    assert "call void @__kp_block(i32 0)" in text and "call void @__kp_block(i32 1)" in text
    assert "sanitizer_cov" not in text and "declare void @__kp_block(i32)" in text
    # block 0: the user's fmul; expf inlined from kport's exp for the user's line counts as a
    # transcendental, the fadd inside kport's exp does not. Block 1: kport's add is not the
    # user's; the add on source.metal line 2 is.
    assert table == [[1, 0, 0, 0, 0, 1], [0, 0, 0, 1, 0, 0]]
    ops = operation_counts([[0, 10], [1, 3]], table)
    assert ops["ops_fp32"] == 10 and ops["ops_transcendental"] == 10 and ops["ops_int"] == 3


def test_counted_operations_set_the_compute_term_by_class():
    h200, m2 = perf_chip("H200"), perf_chip("M2")
    launch, n = Launch(groups=h200.cores, threads_per_group=256), 1e9

    def compute(ops: dict, chip) -> float:
        return predict({**ops, "groups": launch.groups}, launch, chip).terms_s["compute"]

    # H200: 16 special-function lanes per SM clock against 128 fp32 lanes (issue-bound)
    assert compute({"ops_transcendental": n}, h200) == pytest.approx(
        8 * compute({"ops_fp32": n}, h200))
    # M2: integer multiplies at 32 lanes per core clock against 128 adds
    assert compute({"ops_int_mul": n}, m2) == pytest.approx(4 * compute({"ops_int": n}, m2))
    # a mix is bound by its busiest class or by issuing everything, whichever is longer
    mixed = compute({"ops_fp32": n, "ops_transcendental": n / 8}, h200)
    assert mixed == pytest.approx(compute({"ops_fp32": n * 9 / 8}, h200))
