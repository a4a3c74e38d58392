"""In-place arrays with gaps (issue 15): vLLM's rotary embedding rotates only the first rot_dim
elements of each head of `query`, in place. MLX's outputs are fresh arrays, so the elements no
thread writes must come back as the caller gave them: the port's run() (and the oracle) run the
kernel with its outputs starting as 0 and as 1 and keep the caller's value wherever the two
differ. A caller may also pass the whole array, longer than the extent the kernel touches."""

from __future__ import annotations

import textwrap

import numpy as np

from tests.cli import kport, load_package

SRC = textwrap.dedent("""\
    __global__ void scale_heads(float* __restrict__ q, float* __restrict__ firsts,
                                const int rot_dim, const int head_size) {
        const int h = blockIdx.x;
        if (threadIdx.x == 0) firsts[h] = q[h * head_size];  // a plain output beside q
        __syncthreads();
        for (int i = threadIdx.x; i < rot_dim; i += blockDim.x)
            q[h * head_size + i] = 2.0f * q[h * head_size + i] + 1.0f;
    }
    void scale_heads_cuda(float* q, float* firsts, int num_heads, int rot_dim, int head_size) {
        scale_heads<<<num_heads, 32>>>(q, firsts, rot_dim, head_size);
    }
    """)


def _want(q: np.ndarray, heads: int, rot: int, head: int) -> np.ndarray:
    out = q.copy().reshape(heads, head)
    out[:, :rot] = 2.0 * out[:, :rot] + 1.0
    return out.reshape(-1)


def test_elements_the_kernel_leaves_alone_keep_the_callers_values(tmp_path):
    path = tmp_path / "heads.cu"
    path.write_text(SRC)
    # the sizes given have gaps (rot_dim < head_size): the oracle must see the same merge
    proc = kport("port", str(path), "--kernel", "scale_heads", "--offline", "--no-kb",
                 "--out", str(tmp_path / "pkg"), "--size", "num_heads=3", "--size", "rot_dim=4",
                 "--size", "head_size=8")
    assert proc.returncode == 0 and "ACCEPTED" in proc.stdout, proc.stdout + proc.stderr
    module = load_package(tmp_path / "pkg", "inplace_gaps")
    rng = np.random.default_rng(0)
    for heads, rot, head in ((3, 4, 8), (5, 3, 16), (2, 8, 8)):
        q = rng.standard_normal(heads * head).astype(np.float32)
        got = module.run(q=q, rot_dim=np.int32(rot), head_size=np.int32(head), num_heads=heads)
        np.testing.assert_array_equal(np.asarray(got["q"]), _want(q, heads, rot, head))
        np.testing.assert_array_equal(np.asarray(got["firsts"]), q.reshape(heads, head)[:, 0])
