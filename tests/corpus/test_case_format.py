"""case.toml loading: good cases load, bad ones fail with the file, the key and why."""

import shutil
from pathlib import Path

import pytest

from corpus.cases import CaseError, discover, evaluate, load_case

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


@pytest.mark.parametrize("old, new, message", [
    ('source = "kernel.cu"', 'source = "/etc/passwd"', r"key `cuda\.source`: .*leads outside"),
    ('source = "port.metal"', 'source = "../../port.metal"', r"key `metal\.source`: .*outside"),
    ('reference = "reference.py:saxpy"', 'reference = "../x.py:saxpy"',
     r"key `check\.reference`: .*outside"),
    ('[check]\n', '[check]\nconstraints = ["n % 2 == 0"]\n',
     r"check\.constraints: 'n % 2 == 0' does not hold for the size set \{'n': 997\}"),
    ('id = "001_saxpy"', 'id = "001_saxpy"\nfolder = "/tmp"', r"key `folder` is not a case key"),
])
def test_a_case_file_cannot_reach_outside_its_folder_or_break_its_constraints(
        case_dir, old, new, message):
    _edit(case_dir, old, new)
    with pytest.raises(CaseError, match=message):
        load_case(case_dir)


def test_a_link_in_a_case_folder_is_refused(case_dir, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not the case's")
    (case_dir / "kernel.cu").unlink()
    (case_dir / "kernel.cu").symlink_to(secret)
    with pytest.raises(CaseError, match="a link in the case folder"):
        load_case(case_dir)


def test_held_out_sizes_stay_inside_what_the_case_lists(case_dir):
    import random

    _edit(case_dir, "[[variants]]\nn = 1\n", "[[variants]]\nn = 1\n\n[[variants]]\nn = 2\n")
    _edit(case_dir, "n = 997", "n = 1000")
    _edit(case_dir, '[check]\n', '[check]\nconstraints = ["n % 2 == 0 or n == 1"]\n')
    case = load_case(case_dir)  # n: 100000, 1000, 1, 2 -> gcd 1, but n must be even (or 1)
    listed = [s["n"] for s in case.size_sets()]
    draws = [case.held_out_sizes(random.Random(seed))["n"] for seed in range(200)]
    assert all(1 <= n <= 100000 and n % 2 == 0 and n not in listed for n in draws)
    assert len(set(draws)) > 150  # drawn, not fixed


def test_a_case_whose_sizes_never_vary_has_no_held_out_sizes(case_dir):
    import random

    _edit(case_dir, "[[variants]]\nn = 997\n\n[[variants]]\nn = 1\n", "")
    assert load_case(case_dir).held_out_sizes(random.Random(0)) is None
