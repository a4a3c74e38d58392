"""The build cache's files are verified against their recorded hashes on use. A process
remembers the files it verified and does not hash them again while their stat is unchanged;
a file replaced behind its back is still refused, even one given back its size and times.
A TU's prelude is compiled once into a precompiled header, which a build that clang refuses
it to does without."""

import os

import numpy as np

from runners import simbuild
from runners.cuda_sim import RawKernel


def _cached(tmp_path, data: bytes):
    path = tmp_path / "kernel.so"
    path.write_bytes(data)
    simbuild._record_hash(path, data)
    return path


def test_a_verified_file_is_found_again(tmp_path):
    path = _cached(tmp_path, b"\x7fELF good library")
    assert simbuild.cached_file(path) == path
    assert simbuild.cached_file(path) == path  # from the memo
    assert path.read_bytes() == b"\x7fELF good library"


def test_a_file_replaced_after_it_was_verified_is_refused_and_removed(tmp_path):
    path = _cached(tmp_path, b"\x7fELF good library")
    assert simbuild.cached_file(path) == path
    before = os.stat(path)
    path.write_bytes(b"\x7fELF evil library")  # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same times
    assert simbuild.cached_file(path) is None
    assert not path.exists()


def test_a_file_whose_hash_record_changed_is_checked_again(tmp_path):
    path = _cached(tmp_path, b"\x7fELF good library")
    assert simbuild.cached_file(path) == path
    simbuild._hash_file(path).write_text("0" * 64)
    assert simbuild.cached_file(path) is None


def test_a_file_gone_is_not_found(tmp_path):
    path = _cached(tmp_path, b"\x7fELF good library")
    assert simbuild.cached_file(path) == path
    path.unlink()
    assert simbuild.cached_file(path) is None


# ---- the precompiled prelude ---------------------------------------------------------------

PRELUDE_KERNEL = r"""
extern "C" __global__ void scale(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * SCALE;
}
"""


def _scaled(factor: str) -> np.ndarray:
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    RawKernel(PRELUDE_KERNEL.replace("SCALE", factor), "scale")((1,), (64,),
                                                                (x, y, np.int32(64)))
    return y


def test_the_prelude_is_split_off_with_line_numbers_kept():
    tu = '#include <kport/rt.h>\n#include <kport/cuda_runtime.h>\n#line 1 "k.cu"\nint x;\n'
    prelude, body = simbuild.split_prelude(tu)
    assert prelude == "#include <kport/rt.h>\n#include <kport/cuda_runtime.h>\n"
    assert body.split("\n")[2:] == tu.split("\n")[2:] and body.startswith("\n\n#line")
    assert simbuild.split_prelude("int x;\n#include <kport/rt.h>\n") == (
        "", "int x;\n#include <kport/rt.h>\n")


def test_builds_read_a_precompiled_prelude_and_a_refused_one_is_made_again(fresh_home):
    np.testing.assert_array_equal(_scaled("2.0f"), np.arange(64) * 2.0)
    pchs = list((fresh_home / "cache" / "build" / "pch").rglob(simbuild.PCH_FILE))
    assert len(pchs) == 1  # the CUDA prelude, under the checked build's flags
    header = pchs[0].with_name("prelude.h")
    # a prelude header that no longer matches: clang refuses the precompiled header, the
    # build reads the shims itself, and the refused header goes
    header.write_text(header.read_text() + "// changed\n")
    np.testing.assert_array_equal(_scaled("3.0f"), np.arange(64) * 3.0)
    assert not pchs[0].exists()
    header.write_text(header.read_text().replace("// changed\n", ""))
    np.testing.assert_array_equal(_scaled("4.0f"), np.arange(64) * 4.0)
    assert pchs[0].exists()  # made again
