"""case.toml loading: good cases load, bad ones fail with the file, the key and why."""

import shutil
from pathlib import Path

import pytest

from evals.cases import CaseError, discover, evaluate, load_case

EXAMPLE = Path(__file__).resolve().parents[2] / "corpus" / "cases" / "001_saxpy"


@pytest.fixture
def case_dir(tmp_path):
    folder = tmp_path / "001_saxpy"
    shutil.copytree(EXAMPLE, folder)
    return folder


def _edit(folder, old, new):
    path = folder / "case.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_example_loads_with_its_size_sets(case_dir):
    case = load_case(case_dir)
    assert case.category == "elementwise"
    assert [s["n"] for s in case.size_sets()] == [100000, 997, 1]


@pytest.mark.parametrize("old, new, message", [
    ('category = "elementwise"', 'category = "elementwize"', r"key `category`: .*unknown"),
    ('dtype = "float32"', 'dtype = "float33"', r"key `args\.0\.dtype`: .*unknown dtype"),
    ('init = "normal"', 'init = "gaussian"', r"key `args\.0\.init`: .*unknown init"),
    ('kernel = "saxpy"', 'kernal = "saxpy"', r"key `cuda\.kernal`: .*[Ee]xtra"),
    ('source = "port.metal"', 'source = "missing.metal"', r"key `metal\.source`: file"),
    ('outputs = ["y_out"]', 'outputs = ["z"]', r"metal\.outputs: 'z' names no array"),
    ('id = "001_saxpy"', 'id = "002_other"', r"key `id`: .* must equal the folder name"),
    ('reference = "reference.py:saxpy"', 'reference = "numpy"', r"key `check\.reference`"),
])
def test_bad_case_files_name_file_key_and_why(case_dir, old, new, message):
    _edit(case_dir, old, new)
    with pytest.raises(CaseError, match=message) as err:
        load_case(case_dir)
    assert str(case_dir / "case.toml") in str(err.value)


def test_invalid_toml_and_missing_file(tmp_path, case_dir):
    with pytest.raises(CaseError, match="no case.toml"):
        load_case(tmp_path)
    (case_dir / "case.toml").write_text("id = \n")
    with pytest.raises(CaseError, match="not valid TOML"):
        load_case(case_dir)


def test_expressions_are_evaluated_safely():
    sizes = {"n": 1000, "rows": 3}
    assert evaluate("ceil_div(n, 256) * 256", sizes) == 1024
    assert evaluate("rows*256 + n % 7", sizes) == 3 * 256 + 1000 % 7
    assert evaluate(7, sizes) == 7
    for bad in ("__import__('os')", "n.real", "open('x')", "cols"):
        with pytest.raises(CaseError, match="cannot evaluate"):
            evaluate(bad, sizes, "where")


def test_discover_by_prefix_and_unknown_id(case_dir):
    assert [c.id for c in discover(case_dir.parent, ["001"])] == ["001_saxpy"]
    with pytest.raises(CaseError, match="no case '999'"):
        discover(case_dir.parent, ["999"])
