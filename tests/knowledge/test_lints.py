"""Performance/portability lints: each fires on a small Metal body that breaks its fact and stays
quiet on one that does not; every lint names a fact that exists."""

import pytest

from kb.arch import ArchError, features
from kb.lints import CATALOGUE, lint_metal
from kb.tgmem import threadgroup_decls

CLEAN = """uint i = thread_position_in_grid.x;
threadgroup float tile[TILE][TILE + 1];
uint t = thread_position_in_threadgroup.x;
tile[t % TILE][t / TILE] = x[i];
threadgroup_barrier(mem_flags::mem_threadgroup);
if (i < n) {
  atomic_fetch_add_explicit(&y[0], simd_sum(x[i]), memory_order_relaxed);
}"""


def _ids(lints):
    return [x.id for x in lints]


def test_every_lint_names_facts_that_exist():
    ids = {f.id for f in features()}
    for lint_id, (severity, sources) in CATALOGUE.items():
        assert severity in ("error", "warning", "info") and sources, lint_id
        assert all(s in ids or s.startswith(("mlx-metal-kernel.md", "apple-gpu-facts.md"))
                   for s in sources), lint_id


@pytest.mark.parametrize("chip", ["M1", "M2 Max", "M3", "M5", "Apple9"])
def test_a_clean_kernel_gives_no_lints(chip):
    assert lint_metal(CLEAN, threadgroup=(256, 1, 1), template={"TILE": 16}, chip=chip) == []


@pytest.mark.parametrize("tg, ids", [
    ((1024, 1, 1), []),
    ((32, 32, 1), []),
    ((2048, 1, 1), ["threadgroup.too_many_threads"]),
    ((32, 32, 2), ["threadgroup.too_many_threads"]),
    ((48, 1, 1), ["threadgroup.partial_simdgroup"]),
    ((16, 2, 1), []),  # SIMD-groups are linear over the whole group: 32 threads fill one
    ((7, 7, 1), ["threadgroup.partial_simdgroup"]),
])
def test_threadgroup_size(tg, ids):
    lints = lint_metal("y[0] = x[0];", threadgroup=tg)
    assert _ids(lints) == ids
    assert all(x.sources for x in lints)


def test_threadgroup_memory_uses_template_values():
    body = "threadgroup float s[BLOCK/32][33];\ny[0] = s[0][0];"
    assert lint_metal(body, template={"BLOCK": 256}) == []  # 8*33*4 = 1056 bytes
    over = lint_metal(body, template={"BLOCK": 8192})  # 256*33*4 = 33792 bytes
    assert _ids(over) == ["tgmem.over_limit"]
    assert "33792 bytes" in over[0].message and over[0].sources == ["F3"]
    assert over[0].severity == "error"


def test_threadgroup_memory_adds_declarations_and_constants():
    body = """#define TILE 64
constexpr int K = TILE / 2;
threadgroup half4 a[TILE][K], b[TILE];
threadgroup float3 c[4];
threadgroup atomic_int count;"""
    sizes = {d.name: d.nbytes for d in threadgroup_decls(body)}
    assert sizes == {"a": 64 * 32 * 8, "b": 64 * 8, "c": 4 * 16, "count": 4}
    assert lint_metal(body) == []
    big = body.replace("#define TILE 64", "#define TILE 128")  # 128*64*8 = 65536 bytes
    assert _ids(lint_metal(big)) == ["tgmem.over_limit"]


def test_threadgroup_memory_that_cannot_be_sized_is_info_and_unsized_is_error():
    lints = lint_metal("threadgroup float s[n];\ny[0] = 1;")
    assert _ids(lints) == ["tgmem.unevaluated"] and lints[0].severity == "info"
    assert "`n`" in lints[0].message and lints[0].line == 1
    assert _ids(lint_metal("threadgroup Foo s[4];")) == ["tgmem.unevaluated"]
    assert _ids(lint_metal("threadgroup float s[];")) == ["tgmem.unsized"]
    # Pointers and parameters are not storage.
    assert lint_metal("threadgroup float* p = nullptr;\ny[0] = 1;") == []


@pytest.mark.parametrize("body", [
    "double acc = 0;\ny[0] = acc;",
    "long long v = 1;\ny[0] = v;",
    "long double v = 1;\ny[0] = v;",
])
def test_fp64_is_an_error(body):
    lints = lint_metal(body)
    assert _ids(lints) == ["types.fp64"] and lints[0].sources == ["F11"]
    assert lints[0].line == 1 and lints[0].file == "source.metal"


def test_fp64_from_template_and_not_from_long_or_comments():
    assert _ids(lint_metal("T v = x[0];", template={"T": "float64"})) == ["types.fp64"]
    assert lint_metal("long v = 1; ulong w = 2;\n// a double in a comment\ny[0] = v + w;") == []
    assert lint_metal('y[0] = 1; // "double"') == []


def test_bfloat_warns_only_where_it_is_emulated():
    body = "bfloat b = bfloat(x[0]);\ny[0] = float(b) * 2;"
    for chip in ("M1", "M2 Ultra", "A15 / A16"):
        lints = lint_metal(body, chip=chip)
        assert _ids(lints) == ["types.bfloat_emulated"] and lints[0].severity == "warning"
    for chip in ("M3", "M4 Max", "M5"):
        assert lint_metal(body, chip=chip) == []
    assert _ids(lint_metal("T v = x[0];", template={"T": "bfloat16"}, chip="M2")) == [
        "types.bfloat_emulated"]


@pytest.mark.parametrize("body", [
    "threadgroup atomic<float> acc;\ny[0] = 1;",
    "threadgroup atomic_float acc[4];\ny[0] = 1;",
    "threadgroup metal::atomic<float> acc;\ny[0] = 1;",
])
def test_float_atomic_in_threadgroup_memory_is_an_error(body):
    lints = lint_metal(body, chip="M4")
    assert _ids(lints) == ["atomics.float_threadgroup"] and lints[0].sources == ["F13"]


def test_float_atomic_via_template_type_and_allowed_forms():
    assert _ids(lint_metal("threadgroup atomic<T> acc;", template={"T": "float32"})) == [
        "atomics.float_threadgroup"]
    assert lint_metal("threadgroup atomic<int> c;\nthreadgroup atomic_uint u;") == []
    ok = "atomic_fetch_add_explicit((device atomic<float>*)&y[0], 1.0f, memory_order_relaxed);"
    assert lint_metal(ok) == []


def test_half_atomics_are_an_error():
    assert _ids(lint_metal("device atomic<half>* p;")) == ["atomics.half"]


def test_64bit_atomics_follow_the_family():
    minmax = "device atomic<ulong>* p;\natomic_fetch_max_explicit(p, 1ul, memory_order_relaxed);"
    add = "device atomic_ulong* p;\natomic_fetch_add_explicit(p, 1ul, memory_order_relaxed);"
    signed = "device atomic<long>* p;"
    assert _ids(lint_metal(minmax, chip="M1")) == ["atomics.64bit"]
    assert lint_metal(minmax, chip="M2") == []
    assert _ids(lint_metal(add, chip="M2")) == ["atomics.64bit_op"]
    assert _ids(lint_metal(signed, chip="M2")) == ["atomics.64bit"]
    for body in (minmax, add, signed):
        assert lint_metal(body, chip="M3") == []
    assert _ids(lint_metal("device atomic<T>* p;", template={"T": "uint64"}, chip="M1")) == [
        "atomics.64bit"]


def test_memory_orders_other_than_relaxed():
    rmw = "atomic_fetch_add_explicit(&y[0], 1, memory_order_seq_cst);"
    assert _ids(lint_metal(rmw)) == ["atomics.memory_order"]
    fence = "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst);"
    lints = lint_metal(fence)
    assert _ids(lints) == ["atomics.fence_order"] and lints[0].severity == "info"


def test_return_before_barrier_warns():
    body = """uint t = thread_position_in_threadgroup.x;
if (t >= n) return;
threadgroup_barrier(mem_flags::mem_threadgroup);"""
    lints = lint_metal(body)
    assert _ids(lints) == ["sync.return_before_barrier"] and lints[0].line == 2
    assert lints[0].sources == ["F19"]
    after = "threadgroup_barrier(mem_flags::mem_threadgroup);\nif (t >= n) return;\ny[t] = 1;"
    assert lint_metal(after) == []


def test_spin_wait_warns_but_a_cas_loop_does_not():
    spin = "while (atomic_load_explicit(&flag[0], memory_order_relaxed) == 0) {}"
    assert _ids(lint_metal(spin)) == ["sync.spin_wait"]
    cas = ("float old = atomic_load_explicit(p, memory_order_relaxed);\n"
           "while (!atomic_compare_exchange_weak_explicit(p, &old, old + v, "
           "memory_order_relaxed, memory_order_relaxed)) {}")
    assert lint_metal(cas) == []


def test_shift_and_fill_needs_apple8():
    body = "y[0] = simd_shuffle_and_fill_down(x[0], x[1], ushort(1));"
    assert _ids(lint_metal(body, chip="M1")) == ["simd.shift_fill"]
    assert lint_metal(body, chip="M2") == []


def test_simdgroup_matrix_must_be_8x8():
    assert _ids(lint_metal("simdgroup_matrix<float, 16, 16> m;")) == ["matrix.not_8x8"]
    assert _ids(lint_metal("simdgroup_matrix<half, N, N> m;", template={"N": 16})) == [
        "matrix.not_8x8"]
    assert lint_metal("simdgroup_matrix<float, 8, 8> m;\nsimdgroup_float8x8 n;") == []


def test_tensor_ops_warn_before_apple10():
    body = "mpp::tensor_ops::matmul2d<desc> op;"
    assert "matrix.tensor_ops" in _ids(lint_metal(body, chip="M4"))
    assert lint_metal(body, chip="M5") == []


def test_header_is_read_too_and_lints_name_the_file():
    lints = lint_metal("y[0] = f(x[0]);", header="inline double f(float v) { return v; }\n")
    assert [(x.id, x.file, x.line) for x in lints] == [("types.fp64", "header.metal", 1)]


def test_errors_come_first_and_an_unknown_chip_is_an_arch_error():
    lints = lint_metal("double d;\nthreadgroup float s[n];", threadgroup=(33, 1, 1))
    assert [x.severity for x in lints] == ["error", "warning", "info"]
    assert "(F11)" in str(lints[0]) and str(lints[0]).startswith("source.metal:1: error:")
    with pytest.raises(ArchError, match="unknown chip"):
        lint_metal("y[0] = 1;", chip="M9")


@pytest.mark.parametrize("expr, value", [
    ("BLOCK / 32", 8), ("-7 / 2", -3), ("-7 % 2", -1), ("N -1", 3), ("1 << 5 | 3", 35),
    ("(N + 1) * 2", 10), ("0x10 + 010 + 2u", 26), ("sizeof(float4) * 2", 32), ("sizeof(T)", 2),
    ("true + 1", 2),
])
def test_size_expressions_follow_c(expr, value):
    from kb.tgmem import evaluate
    from runners.srcrewrite import tokenize

    words = [t.text for t in tokenize(expr)]
    assert evaluate(words, {"BLOCK": 256, "N": 4}, {"T": "half"}) == value


def test_sizes_use_sizeof_of_template_types_like_real_kernels():
    body = """constexpr int LD = D + 16 / sizeof(T);
threadgroup T kv[BK * LD];"""
    (decl,) = threadgroup_decls(body, {"T": "float16", "D": 64, "BK": 32})
    assert decl.nbytes == 32 * (64 + 8) * 2
    over = lint_metal(body, template={"T": "float32", "D": 256, "BK": 64})
    assert _ids(over) == ["tgmem.over_limit"]


def test_template_dtypes_may_be_mlx_dtypes():
    import mlx.core as mx

    assert _ids(lint_metal("T v = x[0];", template={"T": mx.float64})) == ["types.fp64"]
