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


def test_metal_file_and_missing_file_are_one_line_errors(tmp_path):
    metal = tmp_path / "k.metal"
    metal.write_text("kernel void k() {}\n")
    run = kport("perf", str(metal), "--kernel", "k", "--chip", "M2")
    assert run.returncode == 2 and "reads CUDA sources only" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    run = kport("perf", str(tmp_path / "none.cu"), "--kernel", "k", "--chip", "M2")
    assert run.returncode == 2 and "no such file" in run.stderr


def test_bad_size_is_a_one_line_error():
    run = kport("perf", str(SAXPY), "--kernel", "saxpy", "--chip", "H200", "--size", "n=ten")
    assert run.returncode == 2 and "--size 'n=ten': write NAME=INT" in run.stderr
