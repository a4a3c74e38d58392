"""`kport perf` as a user runs it: JSON shape, the text report, and one-line errors."""

from __future__ import annotations

import json

from tests.cli import ROOT, kport

SAXPY = ROOT / "corpus" / "cases" / "001_saxpy" / "kernel.cu"


def test_perf_json_carries_the_prediction_and_its_breakdown():
    run = kport("perf", str(SAXPY), "--kernel", "saxpy", "--chip", "H200", "--size", "n=65536",
                "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["chip"] == "H200" and out["kernel"] == "saxpy" and out["validated"] is True
    assert out["predicted_s"] > 0 and out["bottleneck"] in out["terms_s"]
    assert {"dram", "l2", "shared", "compute", "atomics", "sync"} <= set(out["terms_s"])
    assert out["grid"] == [256, 1, 1] and out["block"] == [256, 1, 1]
    # x read, y read and written: 3 x 65536 floats in sectors of 32 bytes
    assert out["counters"]["footprint_sectors"] == 3 * 65536 * 4 // 32
    assert out["counters"]["global_load_sectors"] == 2 * 65536 * 4 // 32


def test_perf_text_for_an_apple_chip_says_it_is_unvalidated():
    run = kport("perf", str(SAXPY), "--kernel", "saxpy", "--chip", "M2", "--size", "n=4096")
    assert run.returncode == 0, run.stderr
    assert "saxpy on M2:" in run.stdout and "unvalidated until measured on a Mac" in run.stdout


def test_unknown_chip_is_one_line_listing_the_known_chips():
    run = kport("perf", str(SAXPY), "--kernel", "saxpy", "--chip", "X9", "--size", "n=64")
    assert run.returncode == 2
    line = run.stderr.strip()
    assert "\n" not in line and "unknown chip 'X9'; one of H200, M1" in line


SCALE = """#include <metal_stdlib>
using namespace metal;
kernel void scale(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                  constant uint& n [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  if (i < n) y[i] = exp(x[i]);
}
"""


def test_perf_of_a_metal_library_kernel(tmp_path):
    metal = tmp_path / "k.metal"
    metal.write_text(SCALE)
    run = kport("perf", str(metal), "--kernel", "scale", "--chip", "M2", "--size", "n=4096",
                "--shape", "x=n", "--shape", "y=n", "--grid", "16", "--block", "256", "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["chip"] == "M2" and out["validated"] is False and out["predicted_s"] > 0
    assert out["grid"] == [16, 1, 1] and out["block"] == [256, 1, 1]
    c = out["counters"]
    # x read and y written, 4096 floats each, coalesced: 4096 / 8 sectors apiece; one exp
    # per thread
    assert c["global_load_sectors"] >= 4096 // 8 and c["global_store_sectors"] == 4096 // 8
    assert c["ops_transcendental"] == 4096


def test_metal_without_a_launch_or_a_case_and_a_missing_file_are_one_line_errors(tmp_path):
    metal = tmp_path / "k.metal"
    metal.write_text(SCALE)
    run = kport("perf", str(metal), "--kernel", "scale", "--chip", "M2", "--size", "n=64")
    assert run.returncode == 2 and "launch comes from --grid" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    run = kport("perf", str(metal), "--kernel", "scale", "--chip", "M2", "--size", "n=64",
                "--grid", "1", "--block", "64", "--shape", "x=n")
    assert run.returncode == 2 and "buffer `y` needs a length: pass --shape y=N" in run.stderr
    body = tmp_path / "body.metal"
    body.write_text("uint i = thread_position_in_grid.x; y[i] = x[i];\n")
    run = kport("perf", str(body), "--chip", "M2")
    assert run.returncode == 2 and "MLX kernel body" in run.stderr and "--case" in run.stderr
    run = kport("perf", str(tmp_path / "none.cu"), "--kernel", "k", "--chip", "M2")
    assert run.returncode == 2 and "no such file" in run.stderr


def test_perf_of_a_cases_metal_port():
    case = ROOT / "corpus" / "cases" / "001_saxpy"
    run = kport("perf", str(case / "port.metal"), "--case", str(case), "--chip", "M2",
                "--size", "n=8192", "--json")
    assert run.returncode == 0, run.stderr
    c = json.loads(run.stdout)["counters"]
    # x and y read, y_out written: 8192 floats each in 32-byte sectors; one fma per element
    assert c["global_store_sectors"] == 8192 * 4 // 32 and c["ops_fp32"] == 8192


def test_bad_size_is_a_one_line_error():
    run = kport("perf", str(SAXPY), "--kernel", "saxpy", "--chip", "H200", "--size", "n=ten")
    assert run.returncode == 2 and "--size 'n=ten': write NAME=INT" in run.stderr
