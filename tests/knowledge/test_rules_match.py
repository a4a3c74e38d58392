"""Exact retrieval: which concept rules a CUDA kernel uses, by tree-sitter token sequences."""

import pytest

from kb.concepts import load_rules
from kb.rules_match import RulesQueryError, kernel_tokens, match_rules, rules_for_file

# Rules whose example shows the Metal-side idea in a kernel that does not itself contain the
# construct (host API, a compiler flag, a literal form or an idiom no token sequence names).
NOT_IN_OWN_EXAMPLE = {
    "cooperative.grid_sync": "example is the single-block replacement of a grid sync",
    "debug.error_counter": "example counts errors into an output, no global counter",
    "fp64.double_literals": "unsuffixed literals are a lexical form, not a token sequence",
    "intrinsics.bfe": "example writes the shift-and-mask form",
    "intrinsics.rotate": "example writes the shift-or form",
    "launch.lane_id": "example derives the lane from a 2-D index",
    "launch.warp_id": "example derives the warp from a local variable",
    "launch.max_threads_per_group": "a device attribute queried on the host",
    "launch.triple_chevron": "the launch is host code",
    "math.fma_contraction": "an nvcc flag",
    "memory.constant_symbol_input": "example already passes the table as an input",
    "memory.in_place_update": "in-place is a property of the launch, not a token",
    "types.packed_float4": "example shows the scalar fallback",
}


def test_rules_apply_to_their_own_examples():
    missing = []
    for rule in load_rules():
        if rule.group == "host" or rule.match == [] or rule.id in NOT_IN_OWN_EXAMPLE:
            continue
        if rule.id not in {h.rule_id for h in match_rules(kernel_tokens(rule.example.cuda))}:
            missing.append(rule.id)
    assert not missing


def test_tokens_not_substrings_and_comments_ignored():
    src = """__global__ void k(float* y) {
  int my_threadIdx = 3;  // threadIdx.x in a comment; __syncthreads();
  y[my_threadIdx] = 1.0f;
}"""
    ids = {h.rule_id for h in match_rules(kernel_tokens(src))}
    assert "launch.thread_idx" not in ids and "sync.syncthreads" not in ids


def test_spacing_does_not_matter_and_lines_and_counts_are_reported():
    src = """__global__ void k(const float* x, float* y) {
  int i = blockIdx . x * blockDim.x + threadIdx
      .x;
  __syncthreads();
  __syncthreads();
  y[i] = x[i];
}"""
    hits = {h.rule_id: h for h in match_rules(kernel_tokens(src))}
    assert hits["sync.syncthreads"].occurrences == 2 and hits["sync.syncthreads"].lines == [4, 5]
    assert hits["launch.block_idx"].lines == [2]
    order = [h.rule_id for h in match_rules(kernel_tokens(src))]
    assert order.index("launch.block_idx") < order.index("sync.syncthreads")


def test_conjunction_markers_need_every_part():
    with_shared = """__global__ void k(int* y) {
  __shared__ int c; if (threadIdx.x == 0) c = 0; __syncthreads();
  atomicAdd(&c, 1); __syncthreads(); if (threadIdx.x == 0) y[0] = c;
}"""
    global_only = "__global__ void k(int* y) { atomicAdd(&y[0], 1); }"
    assert "atomics.threadgroup_int" in {h.rule_id for h in match_rules(kernel_tokens(with_shared))}
    assert "atomics.threadgroup_int" not in {
        h.rule_id for h in match_rules(kernel_tokens(global_only))}


def test_kernel_selection_includes_callees_only(tmp_path):
    f = tmp_path / "two.cu"
    f.write_text("""__device__ float w(float v) { return __shfl_xor_sync(0xffffffffu, v, 1); }
__global__ void a(float* y) { y[threadIdx.x] = w(y[threadIdx.x]); }
__global__ void b(float* y) { atomicAdd(y, 1.0f); }
""")
    a = {h.rule_id for h in rules_for_file(f, "a")}
    b = {h.rule_id for h in rules_for_file(f, "b")}
    assert "warp.shfl_xor" in a and "warp.shfl_xor" not in b
    assert "atomics.add_float_device" in b and "atomics.add_float_device" not in a
    with pytest.raises(RulesQueryError, match="no kernel named 'c'; kernels here: a, b"):
        rules_for_file(f, "c")
