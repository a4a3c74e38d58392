"""The offline optimiser's mechanical rewrites (agent/rewrites): each applies exactly where its
analysis holds and refuses elsewhere; what they produce from real translator ports passes
the harness."""

import pytest

from agent.rewrites import fingerprint, propose
from agent.rewrites.barriers import narrow_barriers, output_reads
from agent.rewrites.launch import template_sweeps, threadgroup_sweeps
from agent.rewrites.simd import simd_collectives
from agent.rewrites.unroll import unroll_loops
from corpus.candidate import Candidate


def cand(body: str, header: str = "", **launch) -> Candidate:
    fields = {"inputs": ["x", "n"], "outputs": ["y"], "grid": ["(rows) * (256)"],
              "threadgroup": ["256"], "template": {}} | launch
    return Candidate(body=body, header=header, **fields)


LOOP = "for (int o = 16; o > 0; o >>= 1) {}\n"


@pytest.mark.parametrize(("stmt", "want"), [
    ("v += simd_shuffle_xor(v, ushort(o));", "v = simd_sum(v);"),
    ("v = v + simd_shuffle_down(v, o);", "v = simd_sum(v);"),
    ("v = fmax(float(v), float(simd_shuffle_xor(v, ushort(o))));", "v = simd_max(v);"),
    ("v = min(simd_shuffle_xor(v, o), v);", "v = simd_min(v);"),
])
def test_a_full_simd_shuffle_tree_becomes_one_collective(stmt, want):
    body = f"float v = x[0];\n#pragma unroll\n{LOOP.replace('{}', stmt)}y[0] = v;\n"
    out = simd_collectives(cand(body))
    assert out is not None and want in out.body
    assert "simd_shuffle" not in out.body and "#pragma" not in out.body
    assert out.body.count("\n") == body.count("\n")  # lines kept for diagnostics


@pytest.mark.parametrize("loop", [
    "for (int o = 8; o > 0; o >>= 1) v += simd_shuffle_xor(v, ushort(o));",  # 16 lanes only
    "for (int o = 16; o > 1; o >>= 1) v += simd_shuffle_xor(v, ushort(o));",  # stops at 2
    "for (int o = 16; o > 0; o >>= 1) v += simd_shuffle_xor(w, ushort(o));",  # another value
    "for (int o = 16; o > 0; o >>= 1) v = op(v, simd_shuffle_xor(v, ushort(o)));",  # functor
    "for (int o = 16; o > 0; o >>= 1) v *= simd_shuffle_xor(v, ushort(o));",  # a product
    "for (int o = 16; o > 0; o >>= 1) { s.m += simd_shuffle_xor(s.m, ushort(o)); }",  # member
    "for (int o = 16; o > 0; o >>= 1) v += simd_shuffle_up(v, ushort(o));",  # a scan step
])
def test_anything_but_a_full_simd_reduction_is_left_alone(loop):
    assert simd_collectives(cand(f"float v = x[0], w = v;\n{loop}\ny[0] = v;\n")) is None


BARRIER = "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);"


def test_barriers_narrow_when_outputs_are_only_stored_through():
    body = ("threadgroup float s[256];\ndevice float* dst = y + 4;\ns[0] = x[0];\n"
            f"{BARRIER}\ndst[thread_position_in_threadgroup.x] = s[0];\n")
    out = narrow_barriers(cand(body))
    assert out is not None and "mem_device" not in out.body
    assert "threadgroup_barrier(mem_flags::mem_threadgroup);" in out.body


@pytest.mark.parametrize(("use", "why"), [
    ("float t = dst[1];", "dst"),  # a load through a derived pointer
    ("y[0] += 1.0f;", "y"),  # a compound assignment reads
    ("atomic_fetch_add_explicit((device atomic_float*)&y[0], 1.0f, memory_order_relaxed);",
     "y"),  # an atomic
    ("helper(dst);", "dst"),  # passed to a function: its use is not visible
])
def test_barriers_stay_when_the_kernel_may_read_what_it_writes(use, why):
    body = f"device float* dst = y + 4;\ndst[0] = 1.0f;\n{BARRIER}\n{use}\n"
    c = cand(body)
    assert why in output_reads(c) and narrow_barriers(c) is None


def test_unroll_marks_constant_trip_loops_only():
    body = ("constexpr int K = 4;\nfloat a = 0;\nfor (int i = 0; i < K; ++i) a += x[i];\n"
            "for (int j = 0; j < TILE; j += 2) a += x[j];\n"
            "for (int k = 0; k < n; ++k) a += x[k];\ny[0] = a;\n")
    out = unroll_loops(cand(body, template={"TILE": 16}))
    assert out is not None and out.body.count("#pragma unroll") == 2
    assert "#pragma unroll\nfor (int k" not in out.body
    assert unroll_loops(out) is None  # marked loops are not marked twice


def test_template_sweep_moves_the_group_and_keeps_the_group_count(saxpy):
    from corpus.cases import discover

    case = discover(ids=["011"])[0]
    c = cand("threadgroup float s[BLOCK / 32];\ny[0] = s[0] + BLOCK;\n",
             template={"BLOCK": 256}, threadgroup=["256", "1", "1"],
             grid=["(rows) * (256)", "(1) * (1)", "(1) * (1)"])
    sweeps = dict(template_sweeps(c, case))
    assert list(sweeps) == ["template:BLOCK=512", "template:BLOCK=128", "template:BLOCK=1024",
                            "template:BLOCK=64"]
    assert sweeps["template:BLOCK=512"].grid[0] == "rows * 512"
    assert sweeps["template:BLOCK=512"].threadgroup[0] == "512"
    # a tile too big for 32 KB of threadgroup memory is not proposed
    big = c.model_copy(update={"body": "threadgroup float s[BLOCK * 16];\ny[0] = s[0];\n"})
    assert "template:BLOCK=1024" not in dict(template_sweeps(big, case))


def test_threadgroup_sweep_keeps_the_threads_or_refuses(saxpy):
    free = cand("y[thread_position_in_grid.x] = x[thread_position_in_grid.x];\n",
                grid=["(ceil_div(n, 256)) * (256)"])
    sweeps = dict(threadgroup_sweeps(free, saxpy))
    assert sweeps["threadgroup:512"].grid == free.grid  # only the grouping changes
    indexed = free.model_copy(update={"body": "uint i = threadgroup_position_in_grid.x * "
                                      "threads_per_threadgroup.x + thread_position_in_"
                                      "threadgroup.x;\ny[i] = x[i];\n"})
    assert dict(threadgroup_sweeps(indexed, saxpy))["threadgroup:128"].grid == [
        "ceil_div(n, 128) * 128"]
    baked = free.model_copy(update={"body": "threadgroup float s[256];\ny[0] = s[0];\n"})
    assert threadgroup_sweeps(baked, saxpy) == []


def test_fingerprints_ignore_how_a_launch_is_spelt():
    a = cand("y[0] = 1;\n")
    assert fingerprint(a) == fingerprint(a.model_copy(update={"grid": ["rows * 256"]}))
    assert fingerprint(a) != fingerprint(a.model_copy(update={"grid": ["rows * 512"]}))


@pytest.mark.parametrize(("cid", "action"), [("008", "simd_collectives"),
                                             ("013", "simd_collectives"),
                                             ("013", "narrow_barriers"),
                                             ("011", "template:BLOCK=512")])
def test_rewrites_of_translator_ports_pass_the_harness(cid, action):
    from agent.nodes.analyze import translate_for_case
    from agent.nodes.check import run_check
    from corpus.cases import discover

    case = discover(ids=[cid])[0]
    src = (case.folder / case.cuda.source).read_text()
    port = Candidate.from_translation(translate_for_case(src, case.cuda.kernel, case, "k.cu"))
    found = {p.action: p.candidate for p in propose(port, case)}
    assert found[action].origin == f"opt:{action}"
    result = run_check(case, found[action], 1)
    assert result["ok"], result["feedback"]


def test_sweeps_need_two_size_sets_to_be_judged(saxpy):
    """At one size set a wrong split of the work can pass by luck, so no sweep is proposed."""
    from corpus.cases import discover

    case = discover(ids=["011"])[0]
    c = cand("threadgroup float s[BLOCK / 32];\ny[0] = s[0] + BLOCK;\n",
             template={"BLOCK": 256}, threadgroup=["256", "1", "1"],
             grid=["(rows) * (256)", "(1) * (1)", "(1) * (1)"])
    assert len(case.size_sets()) >= 2
    assert any(p.action.startswith("template:") for p in propose(c, case))
    one = case.model_copy(update={"variants": []})
    assert not any(p.action.startswith(("template:", "threadgroup:")) for p in propose(c, one))


def saxpy_sized(saxpy):
    """Case 001 (saxpy) at sizes of 8 elements or more, none a multiple of 4 but the first."""
    return saxpy.model_copy(update={"variants": [{"n": 997}, {"n": 4099}]})


SAXPY_BODY = ("int i = threadgroup_position_in_grid.x * threads_per_threadgroup.x + "
              "thread_position_in_threadgroup.x;\nif (i < n) {S}\n")


def saxpy_cand(stmt: str = "y_out[i] = a * x[i] + y[i];", **launch) -> Candidate:
    return cand(SAXPY_BODY.replace("{S}", stmt), **{
        "inputs": ["x", "y", "a", "n"], "outputs": ["y_out"],
        "grid": ["(ceil_div(n, 256)) * (256)", "(1) * (1)", "(1) * (1)"],
        "threadgroup": ["256", "1", "1"]} | launch)


def test_vector_rewrite_reads_and_writes_float4_and_passes_the_harness(saxpy):
    from agent.nodes.check import held_out_check, run_check
    from agent.rewrites.vectors import vector_accesses

    case = saxpy_sized(saxpy)
    out = vector_accesses(saxpy_cand(), case)
    assert out is not None
    assert out.body.count("reinterpret_cast<const device float4*>") == 2
    assert "reinterpret_cast<device float4*>(y_out)[kp_vector] = kp_vec_y_out;" in out.body
    assert "for (int i = 4 * kp_vector; i < (n); ++i)" in out.body  # the tail
    assert out.grid[0] == "ceil_div(ceil_div((ceil_div(n, 256)) * (256), 4), 256) * 256"
    result = held_out_check(case, out, run_check(case, out, 1))
    assert result["ok"], result["feedback"]
    assert {r["sizes"]["n"] for r in result["runs"]} >= {100000, 997, 4099, 200001}
    # the harness would see a vector port that drops the tail (n = 997 is not 4 k)
    no_tail = out.model_copy(update={"body": out.body.replace(
        "i < (n); ++i)", "i < (n) && false; ++i)")})
    assert not run_check(case, no_tail, 1)["ok"]


def test_vector_rewrite_keeps_the_index_where_the_statement_uses_it(saxpy):
    from agent.nodes.check import run_check
    from agent.rewrites.vectors import vector_accesses

    case = saxpy_sized(saxpy)
    out = vector_accesses(saxpy_cand("{ float t = a * x[i]; y_out[i] = t + y[i] + 0.0f * "
                                     "float(i); }"), case)
    assert out is not None and "const int i = 4 * kp_vector + 3;" in out.body
    result = run_check(case, out, 1)
    assert result["ok"], result["feedback"]


@pytest.mark.parametrize("stmt", [
    "if (x[i] > 0) y_out[i] = x[i];",  # an element not written in every component
    "y_out[i] = x[i + 1];",  # a neighbour
    "y_out[i] = x[i]; y_out[i] = y_out[i] + y[i];",  # an output read
    "{ y_out[i] = x[i]; return; }",  # a jump
    "y_out[i] = simd_sum(x[i]);",  # a SIMD-group function
    "y_out[i] = x[thread_position_in_grid.x];",  # the thread's position
])
def test_vector_rewrite_refuses_anything_but_one_element_per_thread(saxpy, stmt):
    from agent.rewrites.vectors import vector_accesses

    assert vector_accesses(saxpy_cand(stmt), saxpy_sized(saxpy)) is None


def test_vector_rewrite_refuses_inputs_mlx_passes_as_constant_and_2d_grids(saxpy):
    from agent.rewrites.vectors import vector_accesses

    assert {"n": 1} in saxpy.size_sets()  # x of one element: `constant` in MLX
    assert vector_accesses(saxpy_cand(), saxpy) is None
    assert vector_accesses(saxpy_cand(grid=["(ceil_div(n, 256)) * (256)", "2", "1"]),
                           saxpy_sized(saxpy)) is None
    prelude = saxpy_cand().model_copy(update={"body": "uint lane = thread_index_in_simdgroup;\n"
                                              + SAXPY_BODY.replace("{S}", "y_out[i] = lane;")})
    assert vector_accesses(prelude, saxpy_sized(saxpy)) is None
