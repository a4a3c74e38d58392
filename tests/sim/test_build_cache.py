"""The build cache's files are verified against their recorded hashes on use. A process
remembers the files it verified and does not hash them again while their stat is unchanged;
a file replaced behind its back is still refused, even one given back its size and times."""

import os

from runners import simbuild


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
