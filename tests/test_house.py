"""House rules that keep the codebase in shape: ruff clean, no module past 800 lines,
every KPORT_* variable declared in one place, CI runs the README's test command, the packages
import each other in one direction only."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kb.rewrites import load_rewrites
from runners.settings import ENV_VARS

ROOT = Path(__file__).resolve().parents[1]
CODE_DIRS = ("agent", "corpus", "kb", "runners", "evals", "tests")
MAX_LINES = 800


def _code_files(*suffixes):
    for top in CODE_DIRS:
        for path in (ROOT / top).rglob("*"):
            if path.suffix in suffixes and ".venv" not in path.parts:
                yield path


def test_ruff_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--quiet", *CODE_DIRS],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_module_passes_800_lines():
    too_long = {
        str(p.relative_to(ROOT)): n
        for p in _code_files(".py", ".h", ".hpp", ".cpp", ".cu", ".metal")
        if (n := len(p.read_text(errors="replace").splitlines())) > MAX_LINES
    }
    assert not too_long, f"split these along a real seam: {too_long}"


def test_every_kport_variable_is_declared():
    used = set()
    for path in _code_files(".py"):
        if path.parent.name == "tests":
            continue
        used |= set(re.findall(r"KPORT_[A-Z_]+", path.read_text()))
    undeclared = used - set(ENV_VARS)
    assert not undeclared, f"declare these in runners/settings.py ENV_VARS: {sorted(undeclared)}"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```(?:sh|bash)\n(.*?)\n```", readme, re.S)
    test_cmd = next(c for c in commands if "pytest" in c)
    assert test_cmd.strip() in (ROOT / ".ci" / "run").read_text()


# Each package may import those before it, never one after it (docs/architecture.md).
LAYERS = ("runners", "corpus", "kb", "agent", "evals")


def _imported_packages(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import in ``path``, those inside
    functions included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def test_packages_import_only_the_layers_below_them():
    upward = []
    for rank, package in enumerate(LAYERS):
        for path in sorted((ROOT / package).rglob("*.py")):
            if ".venv" in path.parts:
                continue
            upward += [f"{path.relative_to(ROOT)}:{line} imports {target}"
                       for line, target in _imported_packages(path)
                       if target in LAYERS and LAYERS.index(target) > rank]
    assert not upward, "an import against the layer order " + " < ".join(LAYERS) + ":\n" + \
        "\n".join(upward)


def test_callers_pick_runners_only_through_runners_get():
    """Above runners/, a runner is picked by name (runners/base.py), never by importing its
    module: adding a target is then one new file. Its helpers (metal_sim.codegen, ...) may be
    imported. kernel_template.py runs on a Mac without kport; bench_sim.py times cuda_sim's
    own internals."""
    from runners.base import NAMES

    exempt = {"agent/kernel_template.py", "evals/bench_sim.py"}
    modules = {f"runners.{n}" for n in NAMES}
    direct = []
    for package in LAYERS[1:]:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            if ".venv" in path.parts or where in exempt:
                continue
            for node in ast.walk(ast.parse(path.read_text(), where)):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module == "runners":
                    names = [f"runners.{a.name}" for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module]
                else:
                    continue
                direct += [f"{where}:{node.lineno} imports {n}" for n in names if n in modules]
    assert not direct, "use runners.get(name) instead:\n" + "\n".join(direct)


@pytest.mark.slow
def test_a_non_editable_install_ships_the_corpus_and_the_rules(tmp_path):
    """The cases and the KB rules are package data: an installed kport (not a checkout) finds
    all of them."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", str(ROOT), "--target", str(target)],
                   check=True, capture_output=True, timeout=600)
    probe = ("import corpus.cases as c, kb.concepts as k, kb.rewrites as r\n"
             "print(c.corpus_dir().parent == __import__('pathlib').Path(c.__file__).parent,"
             " len(c.discover()), len(k.load_rules()) > 100, len(r.load_rewrites().atomics))")
    shipped = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(target)},
                             timeout=300)
    here = len([p for p in (ROOT / "corpus" / "cases").iterdir() if (p / "case.toml").is_file()])
    atomics = len(load_rewrites().atomics)
    assert shipped.stdout.split() == ["True", str(here), "True", str(atomics)], shipped.stderr


def test_tests_start_the_cli_one_way():
    """tests/cli.py says once how a test starts `kport` as a user would (KPORT, kport());
    no other test file spells the command again."""
    spelled = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").rglob("*.py"))
               if p.name != "cli.py" and re.search(r"""["']agent\.cli["']""", p.read_text())]
    assert not spelled, spelled


def test_one_module_makes_tree_sitter_parsers():
    """Grammars, parsers and the leaf-token walk live in runners/sourcetree.py alone; kb/parse.py
    and runners/srcrewrite.py (and any new reader) use them instead of a tokenizer of their own."""
    makers = set()
    for path in _code_files(".py"):
        if "tests" in path.relative_to(ROOT).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "tree_sitter":
                names = [a.name for a in node.names if a.name in ("Parser", "Language")]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            if any(n in ("Parser", "Language", "tree_sitter") or n.startswith("tree_sitter_")
                   for n in names):
                makers.add(str(path.relative_to(ROOT)))
    assert makers == {"runners/sourcetree.py"}, sorted(makers)


def _function_import_runs(tree: ast.Module) -> list[list[ast.stmt]]:
    """Runs of consecutive import statements inside functions and classes (an
    ``if TYPE_CHECKING:`` block's left out): module-level ones, in ``if`` or ``try`` too, are
    not counted."""
    runs: list[list[ast.stmt]] = []

    def visit(body: list, nested: bool) -> None:
        run: list[ast.stmt] = []
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                run.append(stmt)
                continue
            if run and nested:
                runs.append(run)
            run = []
            if isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test):
                visit(stmt.orelse, nested)
                continue
            inner = nested or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.ClassDef))
            for _, value in ast.iter_fields(stmt):
                if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                    visit(value, inner)
                elif isinstance(value, list):  # except handlers, match cases
                    for part in value:
                        if isinstance(getattr(part, "body", None), list):
                            visit(part.body, inner)
        if run and nested:
            runs.append(run)

    visit(tree.body, False)
    return runs


def test_every_import_inside_a_function_says_why():
    """Imports go at the module top. One inside a function (a heavy or optional dependency, a
    kport module that pulls one in, a child process's import order) carries a ``# lazy: <why>``
    comment on its line or just above; one comment covers a run of consecutive imports.
    kernel_template.py is exempt: it is the generated kernel.py, run on a Mac without kport."""
    exempt = {"agent/kernel_template.py"}
    unexplained = []
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            if ".venv" in path.parts or where in exempt:
                continue
            text = path.read_text()
            lines = text.splitlines()
            for run in _function_import_runs(ast.parse(text, where)):
                first, last = run[0].lineno, run[-1].end_lineno
                above = first - 1
                while above >= 1 and lines[above - 1].strip().startswith("#"):
                    above -= 1
                if not any("# lazy:" in line for line in lines[above:last]):
                    unexplained += [f"{where}:{n.lineno}: {lines[n.lineno - 1].strip()}"
                                    for n in run]
    assert not unexplained, (
        "move these imports to the module top, or say why one must wait with a "
        "`# lazy: <why>` comment on its line or just above:\n" + "\n".join(unexplained))
