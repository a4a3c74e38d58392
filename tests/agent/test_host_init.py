"""What the host fills an output with before the launch (issue 15: torch-cluster's radius
pre-fills its neighbour lists with -1 and the kernel writes only the neighbours it finds).
The guessed case starts the CUDA oracle from that fill, and the port's fresh MLX outputs start
from it too (init_value), so a partly written output agrees."""

from __future__ import annotations

import json
import textwrap

import numpy as np

from agent.host_init import output_fills
from tests.cli import kport, load_package

HOST = textwrap.dedent("""\
    void host(torch::Tensor x, int n, float *raw, float *kept) {
      auto a = torch::full({n * 4}, -1, x.options().dtype(torch::kLong));
      auto b = torch::zeros({n}, x.options());
      torch::Tensor c = torch::empty({n}, x.options());
      auto d = torch::full(n, 2.5, x.options());
      d.fill_(7);
      auto e = torch::full({n}, some_value(), x.options());
      cudaMemset(raw, 0, n * sizeof(float));
      k<<<1, 32>>>(a.data_ptr<int64_t>(), b.data_ptr<float>(), c.data_ptr<float>(),
                   d.data<float>(), e.data_ptr<float>(), raw, kept, n);
    }
    """)


def test_fills_read_from_the_host_code_before_the_launch():
    args = ["a.data_ptr<int64_t>()", "b.data_ptr<float>()", "c.data_ptr<float>()",
            "d.data<float>()", "e.data_ptr<float>()", "raw", "kept", "n"]
    # e's value is no plain number and kept is never filled: neither is said
    assert output_fills(HOST, 9, args) == {0: -1.0, 1: 0.0, 2: None, 3: 7.0, 5: 0.0}
    assert output_fills(HOST, 1, args) == {}  # nothing is made by line 1


SRC = textwrap.dedent("""\
    #include <torch/extension.h>
    #define THREADS 64
    __global__ void first_above(const float *x, int64_t *hits, const float t, const int64_t n,
                                const int64_t k) {
      const int64_t row = blockIdx.x * blockDim.x + threadIdx.x;
      if (row >= n) return;
      int64_t count = 0;
      for (int64_t j = 0; j < 16 && count < k; j++)
        if (x[row * 16 + j] > t) hits[row * k + count++] = j;
    }
    torch::Tensor first_above_cuda(torch::Tensor x, double t, int64_t k) {
      auto hits = torch::full({x.size(0) * k}, -1, x.options().dtype(torch::kLong));
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "_", [&] {
        first_above<<<(x.size(0) + THREADS - 1) / THREADS, THREADS>>>(
            x.data_ptr<scalar_t>(), hits.data_ptr<int64_t>(), t, x.size(0), k);
      });
      return hits;
    }
    """)


def test_a_partly_written_output_starts_as_the_host_fills_it(tmp_path):
    path = tmp_path / "hits.cu"
    path.write_text(SRC)
    out = tmp_path / "pkg"
    proc = kport("port", str(path), "--kernel", "first_above", "--offline", "--no-kb",
                 "--size", "n=100", "--size", "k=3", "--grid", "ceil_div(n, 64)",
                 "--block", "64", "--shape", "hits=n * k", "--out", str(out))
    assert "ACCEPTED" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads((out / "report.json").read_text())
    assert any(g.startswith("hits: starts as -1, as the host fills it") for g in rep["guessed"])
    module = load_package(out, "kport_hits_port")
    x = np.random.default_rng(2).standard_normal(7 * 16).astype(np.float32)
    got = np.asarray(module.run(x=x, t=1.0, n=7, k=3)["hits"]).reshape(7, 3)
    want = np.full((7, 3), -1)
    for row in range(7):
        above = np.nonzero(x[row * 16:(row + 1) * 16] > 1.0)[0][:3]
        want[row, :above.size] = above
    np.testing.assert_array_equal(got, want)
